"""Index pages are kept out of the answer lists by what they are, not by their name: a README that lists
the vault, a docsify `_sidebar`, a jekyll wiki's `layout: wikiindex` root page. A real note with a long
"see also" list is not one of them, and a query that asks for an index page by name still finds it."""

import pytest
from click.testing import CliRunner

from search_core.config import SearchConfig
from search_core.index.indexer import NAV_RULE_KEY, index_vault
from search_core.index.stats import index_stats
from search_core.index.store import connect, get_meta
from search_core.ingest.parse import LINK_PAGE_SHARE, link_page_measure, parse_note
from search_core.search.pipeline import Searcher
from tests.helpers import write_vault
from tests.helpers.fake_embedder import NAME as FAKE_EMBEDDER
from tuner.cli import main

TOPICS = [
    ("kafka-rebalance", "Kafka 파티션 리밸런싱", "컨슈머 그룹에 멤버가 들어오거나 나가면 파티션 소유권이 다시 배정된다."),
    ("redis-eviction", "Redis 메모리 축출 정책", "maxmemory에 닿으면 allkeys-lru 같은 정책으로 키를 지운다."),
    ("jvm-g1", "JVM G1 가비지 컬렉터", "힙을 리전으로 나누고 쓰레기가 많은 리전부터 수집한다."),
    ("tcp-handshake", "TCP 3-way handshake", "SYN, SYN-ACK, ACK 세 번의 교환으로 연결을 연다."),
    ("git-rebase", "Git rebase 사용법", "커밋을 다른 베이스 위에 다시 쌓아 이력을 곧게 만든다."),
    ("docker-layer", "Docker 이미지 레이어", "Dockerfile 명령마다 읽기 전용 레이어가 하나씩 쌓인다."),
    ("k8s-probe", "Kubernetes liveness probe", "컨테이너가 죽었는지 주기적으로 확인하고 재시작한다."),
    ("postgres-vacuum", "PostgreSQL VACUUM", "죽은 튜플이 차지한 공간을 회수하고 통계를 갱신한다."),
    ("mysql-index", "MySQL 커버링 인덱스", "쿼리에 필요한 컬럼이 모두 인덱스에 있어 테이블을 읽지 않는다."),
    ("http2-push", "HTTP/2 서버 푸시", "클라이언트가 요청하기 전에 리소스를 미리 보낸다."),
    ("oauth-pkce", "OAuth PKCE 흐름", "code_verifier와 code_challenge로 인가 코드 가로채기를 막는다."),
    ("jwt-expiry", "JWT 만료 처리", "exp 클레임이 지나면 리프레시 토큰으로 새 토큰을 받는다."),
    ("react-memo", "React useMemo 훅", "의존성이 바뀔 때만 값을 다시 계산한다."),
    ("css-grid", "CSS Grid 레이아웃", "행과 열을 함께 다루는 2차원 배치 방식이다."),
    ("rust-borrow", "Rust 빌림 검사기", "가변 참조는 한 번에 하나만 허용해 데이터 경쟁을 막는다."),
    ("go-goroutine", "Go 고루틴 스케줄러", "M:N 스케줄링으로 적은 OS 스레드 위에 많은 고루틴을 돌린다."),
    ("python-gil", "Python GIL", "한 번에 한 스레드만 바이트코드를 실행하게 하는 전역 락이다."),
    ("bloom-filter", "블룸 필터", "거짓 양성은 있지만 거짓 음성은 없는 확률적 집합이다."),
    ("raft-election", "Raft 리더 선출", "선거 타임아웃이 지난 팔로워가 후보가 되어 표를 모은다."),
    ("cap-theorem", "CAP 정리", "네트워크 분할 중에는 일관성과 가용성 중 하나를 포기한다."),
    ("lsm-tree", "LSM 트리 컴팩션", "정렬된 SSTable을 합쳐 읽기 증폭을 줄인다."),
    ("btree-split", "B-트리 노드 분할", "노드가 가득 차면 가운데 키를 부모로 올리고 둘로 나눈다."),
    ("utf8-encoding", "UTF-8 인코딩", "코드 포인트를 1~4바이트 가변 길이로 표현한다."),
    ("regex-backtrack", "정규식 백트래킹", "중첩된 수량자가 지수 시간 매칭을 일으킬 수 있다."),
    ("vim-macro", "Vim 매크로 기록", "q로 레지스터에 키 입력을 기록하고 @로 재생한다."),
    ("tmux-session", "tmux 세션 관리", "detach 후에도 세션이 살아 있어 다시 붙을 수 있다."),
    ("ssh-tunnel", "SSH 로컬 포트 포워딩", "-L 옵션으로 원격 포트를 로컬 포트에 연결한다."),
    ("dns-ttl", "DNS TTL", "레코드를 캐시에 얼마나 오래 둘지 정하는 시간이다."),
    ("cdn-cache", "CDN 캐시 무효화", "purge 요청으로 엣지에 남은 오래된 객체를 지운다."),
    ("grpc-stream", "gRPC 양방향 스트리밍", "하나의 HTTP/2 연결 위에서 양쪽이 메시지를 주고받는다."),
]
QUESTION = "Kafka 파티션 리밸런싱"          # the link text every index page below carries for kafka-rebalance


def _note(slug, title, text):
    return f"---\ntitle: {title}\n---\n# {title}\n\n{text}\n"


def nav_vault(root):
    files = {f"{slug}.md": _note(slug, title, text) for slug, title, text in TOPICS}
    # a README listing the 30 notes by their titles ([text](file) links, as GitHub renders them)
    files["README.md"] = "# 노트 모음\n\n" + "".join(f"- [{t}]({s}.md)\n" for s, t, _ in TOPICS)
    # a docsify sidebar: nested lists of the same links
    files["_sidebar.md"] = "- 백엔드\n" + "".join(f"  - [{t}](/{s})\n" for s, t, _ in TOPICS[:20]) + \
                           "- 도구\n" + "".join(f"  - [{t}](/{s})\n" for s, t, _ in TOPICS[20:])
    # a jekyll wiki's root page: [[wiki links]]{shown text}
    files["wiki-index.md"] = "---\nlayout: wikiindex\ntitle: wiki\n---\n## 전체\n\n" + \
        "".join(f"* [[/{s}]]{{{t}}}\n" for s, t, _ in TOPICS)
    # a real note: paragraphs of its own about Kafka, then a long "see also" list
    files["kafka-guide.md"] = (
        "---\ntitle: Kafka 운영 가이드\n---\n# Kafka 운영 가이드\n\n"
        "브로커를 재시작할 때는 한 대씩 순서대로 내리고, 언더 레플리케이티드 파티션이 0이 된 것을 확인한 뒤 다음 "
        "브로커로 넘어간다. 컨슈머 랙은 그룹별로 모니터링하고, 랙이 계속 늘면 컨슈머 수를 파티션 수까지 늘린다.\n\n"
        "## 토픽 설정\n\n보존 기간은 retention.ms로 정하고, 압축 토픽은 cleanup.policy=compact로 키마다 마지막 값만 "
        "남긴다. min.insync.replicas를 2로 두고 acks=all로 보내면 브로커 한 대가 죽어도 쓰기가 유실되지 않는다. "
        "세그먼트 크기와 인덱스 간격은 기본값이 대부분의 부하에 맞다.\n\n"
        "## 장애 대응\n\n컨트롤러가 바뀌면 리더 선출이 몰려 지연이 튄다. 선호 리더 재선출을 주기적으로 돌리고, "
        "디스크가 가득 차기 전에 로그 디렉터리를 늘린다. 프로듀서 재시도는 멱등 프로듀서로 중복 없이 처리한다.\n\n"
        "## 함께 읽기\n\n" + "".join(f"- [[{s}]]\n" for s, _, _ in TOPICS[:15]))
    return write_vault(root, files)


@pytest.fixture
def nav_index(tmp_path, shared_cache):
    db = tmp_path / "idx" / "index.sqlite"
    index_vault(nav_vault(tmp_path / "vault"), db, embedder=FAKE_EMBEDDER, cache=shared_cache)
    return db


INDEX_PAGES = {"README", "_sidebar", "wiki-index"}


def test_the_measure_separates_a_link_page_from_a_note_with_see_also(tmp_path):
    vault = nav_vault(tmp_path / "v")
    readme = link_page_measure((vault / "README.md").read_text(encoding="utf-8"))
    guide = parse_note("kafka-guide", (vault / "kafka-guide.md").read_text(encoding="utf-8"))
    assert readme[1] == 30 and readme[0] > 0.95
    assert guide.nav_reason == "" and link_page_measure(guide.body)[0] < LINK_PAGE_SHARE
    assert parse_note("x", "본문\n\n" + "".join(f"- [바깥 {i}](https://example.com/{i})\n" for i in range(30))
                      ).nav_reason == ""            # links out of the vault are not notes
    assert parse_note("x", "---\nnav: true\n---\n짧은 글").nav_reason == "frontmatter nav: true"


def test_index_pages_are_flagged_at_index_time_with_their_reason(nav_index):
    reasons = index_stats(nav_index)["nav_reasons"]
    assert set(reasons) == INDEX_PAGES, reasons
    assert reasons["wiki-index"] == "frontmatter layout: wikiindex"
    assert reasons["README"] == "link page: 99% of its words are links, to 30 notes"
    assert reasons["_sidebar"].startswith("link page:")


def test_index_pages_stay_out_of_the_top_5_for_a_question_their_link_text_matches(nav_index):
    s = Searcher(nav_index)
    without = [h.note_id for h in s.search(QUESTION, SearchConfig(exclude_nav=False)).hits]
    assert INDEX_PAGES & set(without), without          # the question does reach them by their link text
    res = s.search(QUESTION)
    top = [h.note_id for h in res.hits]
    assert top[0] == "kafka-rebalance" and not INDEX_PAGES & set(top), top
    assert "kafka-guide" in top                          # the note with a "see also" list still answers
    held = dict(res.held_out)
    assert INDEX_PAGES & set(held) and all(held[n] for n in held)


@pytest.mark.parametrize("query,page", [("README", "README"), ("sidebar", "_sidebar"), ("wiki index", "wiki-index"),
                                        ("wiki", "wiki-index"), ("readme 파일", "README")])
def test_an_index_page_asked_for_by_name_is_found(nav_index, query, page):
    res = Searcher(nav_index).search(query)
    assert res.hits[0].note_id == page and res.named == (page,)
    scores = [h.score for h in res.hits]
    assert scores == sorted(scores, reverse=True)       # put first, and scored as the head it took


def test_a_question_that_only_mentions_a_name_is_not_asking_for_the_page(nav_index):
    res = Searcher(nav_index).search("wiki에 정리한 Kafka 파티션 리밸런싱 방법")
    assert res.named == () and not INDEX_PAGES & {h.note_id for h in res.hits}


def test_explain_and_stats_say_which_pages_were_held_out_and_why(nav_index):
    out = CliRunner().invoke(main, ["search", QUESTION, "--db", str(nav_index), "--explain"])
    assert out.exit_code == 0, out.output
    assert "held out as index pages" in out.output and "link page: 99% of its words are links, to 30 notes" in out.output
    out = CliRunner().invoke(main, ["stats", "--db", str(nav_index)])
    assert out.exit_code == 0, out.output
    assert "nav_notes          3" in out.output and "wiki-index" in out.output


def _as_v1(db) -> None:
    """The file as the schema before nav_reason left it: v1 knew neither layouts nor link pages."""
    c = connect(db)
    c.execute("ALTER TABLE notes DROP COLUMN nav_reason")
    c.execute("UPDATE notes SET is_nav = 0")
    c.execute("DELETE FROM meta WHERE key = ?", (NAV_RULE_KEY,))
    c.execute("PRAGMA user_version = 1")
    c.close()


@pytest.mark.parametrize("searched_first", [True, False])
def test_a_v1_index_is_migrated_and_its_next_update_flags_its_index_pages(nav_index, searched_first):
    _as_v1(nav_index)
    c = connect(nav_index)
    vault = get_meta(c, "vault")
    c.close()
    if searched_first:
        assert not Searcher(nav_index).nav_notes()               # opened: migrated to v2, nothing flagged yet
    report = index_vault(vault, nav_index, embedder=FAKE_EMBEDDER)     # an older schema is not damage
    assert (report.added, report.changed, report.deleted) == (0, 0, 0)
    assert Searcher(nav_index).nav_notes() == INDEX_PAGES        # every note read once under the rule
    c = connect(nav_index)
    assert get_meta(c, NAV_RULE_KEY) is not None and c.execute("PRAGMA user_version").fetchone()[0] == 2
    c.close()


def test_the_closest_name_wins_among_pages_that_share_a_file_name(demo_index):
    s = Searcher(demo_index)
    assert s.search("ai index").named == ("ai/index",)            # not every */index page of the vault
    assert set(s.search("index").named) >= {"ai/index", "ai/rag/index", "life/index", "obsidian/index"}


@pytest.mark.parametrize("globs", [SearchConfig().nav_globs, ("*/index", "*[Rr]eadme*", "?i*", "ai/*"), ("[!a-m]*",), ()])
def test_the_index_pages_of_a_set_of_globs_are_the_flagged_notes_and_the_first_glob_each_id_matches(demo_index, globs):
    import fnmatch
    s = Searcher(demo_index)
    want = {}
    for nid, n in s.view.notes.items():
        first = next((g for g in globs if fnmatch.fnmatchcase(nid, g)), None)
        if n["nav_reason"]:
            want[nid] = n["nav_reason"]
        elif first is not None:
            want[nid] = f"id matches nav_globs {first!r}"
    assert s.nav_reasons(globs) == want
    if globs not in ((), SearchConfig().nav_globs):
        assert sum(why.startswith("id matches") for why in want.values()) > 3


def test_a_map_of_content_is_named_moc_as_a_word_and_a_note_about_mocks_is_an_answer(tmp_path, shared_cache):
    body = "Mockito 로 목 객체를 만들고 given 으로 스텁을 건다. verify 로 호출을 확인한다.\n"
    mocs = ["MOC", "Java MOC", "MOC - Spring", "maps/moc", "자바MOC", "topics/Moc 정리"]
    notes = ["mockito", "java/mockito", "kotlin/kotlin-mockk", "test/test-detroit-mockist", "democracy",
             "MOCK_SERVER"]
    vault = write_vault(tmp_path / "vault", {f"{n}.md": f"# {n}\n\n{body}" for n in mocs + notes})
    db = tmp_path / "idx" / "moc.sqlite"
    index_vault(vault, db, embedder=FAKE_EMBEDDER, cache=shared_cache)
    s = Searcher(db)
    assert set(s.nav_reasons(SearchConfig().nav_globs)) == set(mocs)
    assert set(s.search("Mockito 목 객체 스텁", SearchConfig(top_k=10)).ranked) == set(notes)
