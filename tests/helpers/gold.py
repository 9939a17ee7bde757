"""A small valid gold set in our YAML format, and writing one into a temp folder."""


def write(tmp_path, text, name="g.yaml"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


GOOD = """name: t
vault: v
questions:
  - id: Q1
    level: L0
    query: "GraphRAG"
    gold: ["ai/graphrag"]
    why: "title"
  - id: P1
    level: probe
    query: "부대찌개"
    gold: []
    why: "no note"
"""
