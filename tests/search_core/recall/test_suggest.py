"""`recall-log suggest`: which calls to label, on hand-built logs whose probabilities are known."""

import dataclasses
import json
import time

import pytest
from click.testing import CliRunner

from search_core.recall.log import RecallLog, index_id, label_calls, log_search, read_logged_calls
from search_core.recall.suggest import suggest, suggest_from_log
from tuner.cli import main

NOW = time.time()
# 40 distinct topics: no two of these queries are near-duplicates of each other
TOPICS = ["HNSW 파라미터", "떡볶이 양념", "그라인더 클릭", "SQLite PRAGMA", "RRF 가중치", "Leiden 커뮤니티", "김치찌개 재료",
          "파스타 소스", "커피 추출 온도", "쿠버네티스 배포", "파이썬 가상환경", "리랭커 비교", "BM25 정규화",
          "e5 임베딩 접두사", "Obsidian 링크", "마크다운 표", "정규식 lookahead", "git rebase 충돌", "도커 볼륨",
          "nginx 리버스 프록시", "JVM 가비지 컬렉션", "자바 스레드 풀", "러스트 소유권", "Go 채널", "SQL 인덱스 설계",
          "TCP 혼잡 제어", "HTTP 캐시 헤더", "OAuth 토큰 갱신", "CSS 그리드", "React 훅 규칙", "vim 매크로",
          "tmux 세션 복구", "zsh 자동완성", "bash 배열 순회", "awk 필드 합계", "sed 줄 삭제", "make 패턴 규칙",
          "LaTeX 수식 정렬", "엑셀 피벗", "바흐 평균율"]


def _log(tmp_path, probabilities, queries=None, **per_call):
    """One searched call per probability (query i: TOPICS[i] unless given), newest last."""
    log = RecallLog(tmp_path / "log.sqlite")
    ids = []
    for i, p in enumerate(probabilities):
        q = queries[i] if queries else TOPICS[i]
        ids.append(log.write({"ts": NOW - 3600 + i, "session": "s", "query": q, "injected": p >= 0.64,
                              "stopped_by": None if p >= 0.64 else "threshold", "threshold": 0.82,
                              "top_scores": [{"note_id": f"note/{i}", "score": 0.03, "cosine": 0.8}],
                              "features": {"probability": p, "top_cos": 0.8, "band": "skip", "kind": "model"},
                              "index_fingerprint": per_call.get("fingerprint", "fp-A")}))
    log.close()
    return tmp_path / "log.sqlite", ids


def test_half_the_picks_sit_on_both_sides_of_the_threshold_and_the_rest_spread(tmp_path):
    ps = [round(0.0125 + 0.025 * i, 4) for i in range(40)]       # 0.0125 .. 0.9875, evenly
    log, _ = _log(tmp_path, ps)
    out = suggest(read_logged_calls(log), threshold=0.64, n=10)
    got = sorted(s.probability for s in out.picks)
    assert len(got) == 10 and out.scale == "probability" and out.pool == 40
    near = sorted(ps, key=lambda p: abs(p - 0.64))
    above = [p for p in near if p >= 0.64][:3]
    below = [p for p in near if p < 0.64][:2]
    assert set(above + below) <= set(got)                      # the five nearest, alternating sides
    spread = sorted(set(got) - set(above + below))
    assert len(spread) == 5 and spread[0] < 0.15 and spread[-1] > 0.85
    # one per stratum of the remaining 35: no two spread picks in the same fifth of them
    rest = [p for p in ps if p not in above + below]
    strata = [min(rest.index(p) * 5 // len(rest), 4) for p in spread]
    assert sorted(strata) == [0, 1, 2, 3, 4]
    reasons = {round(s.probability, 4): s.reason for s in out.picks}
    assert "above the threshold 0.640" in reasons[above[0]] and "irrelevant label" in reasons[above[0]]
    assert "below the threshold 0.640" in reasons[below[0]] and "relevant label" in reasons[below[0]]
    assert "stratum" in reasons[spread[0]]


def test_near_duplicates_are_one_pick_and_a_labelled_twin_drops_it(tmp_path):
    queries = TOPICS[:10] + ["김치찌개 레시피", "김치찌개 레시피 알려줘", "떡볶이 양념은 어떤 비율로?", "RRF 점수 k 값",
                             "RRF 점수 k 값은?"]
    ps = [0.05 * i for i in range(10)] + [0.63, 0.65, 0.62, 0.66, 0.64]
    log, ids = _log(tmp_path, ps, queries)
    label_calls(log, [(ids[13], "irrelevant")])               # "RRF 점수 k 값" is labelled already
    out = suggest(read_logged_calls(log), threshold=0.64, n=15)
    picked = {s.query: s for s in out.picks}
    assert ("김치찌개 레시피" in picked) != ("김치찌개 레시피 알려줘" in picked)   # one of the two, not both
    twin = picked.get("김치찌개 레시피 알려줘") or picked["김치찌개 레시피"]
    assert "stands for 1 near-duplicate call" in twin.reason
    assert "떡볶이 양념은 어떤 비율로?" in picked and TOPICS[1] in picked       # a paraphrase is another question
    assert "RRF 점수 k 값은?" not in picked and out.left_out["near-duplicate of a labelled call"] == 1
    assert len(out.picks) == 12


def _labelled_from(tmp_path, boundary):
    """40 calls at P 0.0125 .. 0.9875; every third labelled, relevant from `boundary` up."""
    ps = [round(0.0125 + 0.025 * i, 4) for i in range(40)]
    log, ids = _log(tmp_path, ps)
    lab = [(ids[i], "relevant" if ps[i] >= boundary else "irrelevant") for i in range(0, 40, 3)]
    label_calls(log, lab)
    return log, lab


def test_labels_move_the_centre_of_the_picks_to_where_they_point(tmp_path):
    # this vault answers everything from P 0.3 up: the labels say the threshold 0.64 is too high
    log, lab = _labelled_from(tmp_path, 0.3)
    out = suggest(read_logged_calls(log), threshold=0.64, n=6)
    assert out.labelled == len(lab) and out.interval is not None
    assert 0.15 < out.centre < 0.45 and out.interval[0] < out.centre < out.interval[1]
    near = sorted(out.picks, key=lambda s: abs(s.probability - out.centre))[:3]
    assert all(abs(s.probability - out.centre) < 0.1 for s in near)
    assert f"the {len(lab)} labels so far point to" in near[0].reason
    assert not {s.id for s in out.picks} & {i for i, _ in lab}          # a labelled call is never picked again


def test_covering_the_flips_sends_the_near_picks_to_the_calls_a_move_would_flip(tmp_path):
    log, lab = _labelled_from(tmp_path, 0.3)
    out = suggest(read_logged_calls(log), threshold=0.64, n=6, cover_flips=True)
    # the three near picks: the unlabelled calls just under 0.64, nearest it first (0.6125 is labelled)
    flips = [s for s in out.picks if "flips this call" in s.reason]
    assert sorted(s.probability for s in flips) == [0.5625, 0.5875, 0.6375]
    assert "1 of 3 picked" in next(s.reason for s in flips if s.probability == 0.6375)
    assert f"the {len(lab)} labels so far point to" in flips[0].reason
    assert sum("stratum" in s.reason for s in out.picks) == 3
    assert not {s.id for s in out.picks} & {i for i, _ in lab}


def test_labels_that_agree_with_the_threshold_centre_the_near_picks_on_it(tmp_path):
    log, lab = _labelled_from(tmp_path, 0.64)
    out = suggest(read_logged_calls(log), threshold=0.64, n=6, cover_flips=True)
    assert abs(out.centre - 0.64) < 0.05
    near = sorted(out.picks, key=lambda s: abs(s.probability - out.centre))[:3]
    assert all(abs(s.probability - out.centre) < 0.1 for s in near)
    assert not [s for s in out.picks if "flips this call" in s.reason and abs(s.probability - 0.64) > 0.05]


def test_calls_it_cannot_use_are_left_out_and_counted(tmp_path):
    log, _ = _log(tmp_path, [0.5, 0.6, 0.7])
    other, _ = _log(tmp_path / "b", [0.55], fingerprint="fp-B")
    rl = RecallLog(log)
    rl.write({"ts": NOW, "session": "s", "query": "ok", "injected": False, "stopped_by": "too_short"})
    rl.close()
    hashed = RecallLog(log, privacy="hash")
    hashed.write({"ts": NOW, "session": "s", "query": "비밀 질문입니다", "injected": False, "stopped_by": "threshold",
                  "features": {"probability": 0.6}, "index_fingerprint": "fp-A"})
    hashed.close()
    calls = read_logged_calls(log) + [dataclasses.replace(c, id=99) for c in read_logged_calls(other)]
    out = suggest(calls, threshold=0.64, n=20, fingerprint_key="fp-A")
    assert sorted(s.probability for s in out.picks) == [0.5, 0.6, 0.7]
    assert out.left_out == {"logged against another index": 1, "stopped before the gate (no search)": 1,
                            "no query text (privacy = hash)": 1}


def test_cli_json_shape_and_text(tmp_path):
    log, ids = _log(tmp_path, [0.1, 0.4, 0.6, 0.7, 0.9])
    r = CliRunner().invoke(main, ["recall-log", "suggest", "--log", str(log), "-n", "3", "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)
    assert len(rows) == 3 and all(set(x) == {"id", "query", "top_note", "probability", "reason"} for x in rows)
    assert {x["id"] for x in rows} <= set(ids) and all(x["top_note"].startswith("note/") for x in rows)
    r = CliRunner().invoke(main, ["recall-log", "suggest", "--log", str(log), "-n", "2"])
    assert r.exit_code == 0 and "2 of 5 unlabelled calls" in r.output and "recall-log label" in r.output
    r = CliRunner().invoke(main, ["recall-log", "suggest", "--log", str(tmp_path / "none.sqlite")])
    assert r.exit_code != 0 and "no recall log" in r.output


def test_with_an_index_the_calls_are_scored_by_its_gate(tmp_path, small_index_e5):
    small_index = small_index_e5            # the shipped default gate is fitted for e5-small
    from search_core.search.pipeline import Searcher
    s = Searcher(small_index)
    choice = s.gate_for("none")
    assert choice.model is not None
    qs = ["김치찌개 레시피", "GraphRAG 커뮤니티 요약", "양자 컴퓨터 큐비트 오류 정정", "RRF 점수 k 값"]
    rows = [{"ts": NOW - 60 + i, "session": "s", "query": q, "res": s.search(q), "index_fingerprint": index_id(s.fingerprint)}
            for i, q in enumerate(qs)]
    rows.append({"ts": NOW, "session": "s", "query": "다른 인덱스의 질문", "res": s.search("파리 에펠탑 높이"),
                 "index_fingerprint": "another-index"})
    log = tmp_path / "log.sqlite"
    log_search(log, rows)
    out, gate = suggest_from_log(log, db=small_index, n=10)
    assert gate.model is not None and out.threshold == pytest.approx(choice.model.threshold)
    want = {r["query"]: r["res"].gate.probability for r in rows[:4]}
    assert {p.query: round(p.probability, 6) for p in out.picks} == {q: round(p, 6) for q, p in want.items()}
    assert out.left_out == {"logged against another index": 1}
    s.close()


def test_read_from_the_log_with_a_gate_model_it_picks_what_suggest_picks_over_every_decoded_call(tmp_path,
                                                                                             small_index_e5):
    # suggest_from_log folds the near-duplicates before decoding any features (read_call_heads): the picks, the
    # folds and the counts must be those of suggest() over every call read in full
    from search_core.search.pipeline import Searcher
    s = Searcher(small_index_e5)
    key = index_id(s.fingerprint)
    base = ["김치찌개 레시피", "GraphRAG 커뮤니티 요약", "양자 컴퓨터 큐비트 오류 정정", "RRF 점수 k 값", "파리 에펠탑 높이",
            "Leiden 알고리즘 커뮤니티", "비트코인 반감기", "돼지 앞다리살 두부"]
    res = {q: s.search(q) for q in base}
    rows = []
    for i in range(60):
        q = base[i % len(base)]
        rows.append({"ts": NOW - 3600 + i, "session": "s", "query": q + ["", " 알려줘", "?", " 다시"][i % 4],
                     "res": res[q], "index_fingerprint": key if i % 13 else "another-index",
                     "label": ("relevant" if i % 2 else "irrelevant") if i in (3, 10, 17, 24) else None})
    log = tmp_path / "log.sqlite"
    log_search(log, rows)
    rl = RecallLog(log)
    rl.write({"ts": NOW, "session": "s", "query": "느린 질문", "injected": False, "stopped_by": "error",
              "error": "timeout: 2 s", "index_fingerprint": key})
    rl.write({"ts": NOW, "session": "s", "query": "compact json", "injected": False, "index_fingerprint": key,
              "features": '{"top_cos":0.8,"hit_cos":0.8}'})           # written otherwise than json.dumps does
    rl.close()
    out, gate = suggest_from_log(log, db=small_index_e5, n=6)
    want = suggest(read_logged_calls(log), threshold=gate.threshold, model=gate.model, n=6, fingerprint_key=key)
    assert gate.model is not None and out.picks and out == want
    # the timed-out call only: the compact one searched
    assert out.left_out["stopped before the gate (no search)"] == 1 and out.left_out["logged against another index"]
    s.close()


def test_folding_near_duplicates_finds_what_comparing_every_pair_finds():
    # the prefix-filtered folding must fold exactly as a comparison of each query with every earlier kept or
    # labelled one: the most shared trigrams at or above DUPLICATE_JACCARD, the first added on a tie, and the same
    # trigrams folded where they folded the first time. Queries made to sit on both sides of the Jaccard bar.
    import random
    from search_core.recall.log import CallHead
    from search_core.recall.suggest import DUPLICATE_JACCARD, _fold, _grams, normalise_query
    rng = random.Random(7)
    words = [w for t in TOPICS for w in t.split()] + ["알려줘", "정리", "비교", "예시", "차이", "설정", "오류"]
    bases = [" ".join(rng.sample(words, rng.randint(2, 4))) for _ in range(120)]
    heads = []
    for i in range(1500):
        q = rng.choice(bases)
        q = rng.choice(("", "", "혹시 ", "그럼 ")) + q + rng.choice(("", "?", " 알려줘", " 다시", " 좀 정리해줘"))
        if rng.random() < 0.3:
            q = " ".join(rng.sample(words, rng.randint(2, 4)))
        label = rng.choice(LABELS_OR_NONE) if i < 200 else None
        heads.append(CallHead(i + 1, NOW - 5000 + i * rng.random(), q, label, "fp", True))
    labelled, pool, kept, stands_for, _ = _fold(heads, lambda c: c.searched, "fp")

    added = [(-c.id - 1, _grams(c.query)) for c in labelled]
    whole, folded_to, want_kept, want_stands = {}, {}, [], {}
    for c in sorted(pool, key=lambda c: -c.ts):
        q = normalise_query(c.query)
        if q in folded_to:
            k = folded_to[q]
        else:
            g = frozenset(_grams(c.query))
            k = whole.get(g)
            if k is None:
                best = None
                for order, (key, other) in enumerate(added):
                    shared = len(g & other)
                    if shared / (len(g) + len(other) - shared) >= DUPLICATE_JACCARD and (
                            best is None or (-shared, order) < best[0]):
                        best = ((-shared, order), key)
                if best is not None:
                    k = whole[g] = best[1]
            folded_to[q] = k
            if k is None:
                want_kept.append(c.id)
                added.append((c.id, g))
                folded_to[q] = c.id
                continue
        if k >= 0:
            want_stands.setdefault(k, []).append(c.id)
    assert list(kept) == want_kept and dict(stands_for) == want_stands
    assert 100 < len(want_kept) < len(pool) and want_stands     # both: folds and keeps


LABELS_OR_NONE = ("relevant", "irrelevant", None, None, None)
