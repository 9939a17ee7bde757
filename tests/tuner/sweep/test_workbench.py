"""The workbench's index files: one per embedder spec and chunking, never shared."""


def test_two_model_specs_never_share_an_index_file(tmp_path):
    from search_core.config import ChunkConfig
    from tuner.sweep.workbench import index_path
    c = ChunkConfig()
    a, b = index_path(tmp_path, "st:/models/bge-m3", c), index_path(tmp_path, "st:models/bge-m3", c)
    assert a != b and a.name.startswith("st_models_bge-m3-")
    long = "http://127.0.0.1:8080/v1?model=" + "x" * 80
    assert index_path(tmp_path, long + "a", c) != index_path(tmp_path, long + "b", c)
    assert index_path(tmp_path, "minilm-l6", c) != index_path(tmp_path, "minilm-l6", ChunkConfig(target_chars=300))
