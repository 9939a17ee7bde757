"""A small vault for the questions a vault supplies (tuner/data/vault_questions.py): Korean notes with English
terms, links in every syntax the parser reads, an index note, lines of links only, a note that quotes back the
sentence another note links with, headings many notes share, and a note with a frontmatter summary and aliases."""

QUESTION_VAULT = {
    "ai/graphrag.md": (
        "---\ntitle: GraphRAG\naliases: [그래프 RAG, graph retrieval]\n"
        "summary: 지식 그래프로 커뮤니티 요약을 만드는 검색 증강 생성\n---\n"
        "# GraphRAG\n\nGraphRAG는 엔티티와 관계를 추출해 커뮤니티 요약을 만든다.\n\n"
        "## 커뮤니티 탐지\n\nLeiden 알고리즘으로 커뮤니티를 나눈다. 순위를 합칠 때는 [[/ai/rrf]]{역순위 융합} 방식을 쓴다.\n\n"
        "## 참고\n\n논문과 블로그 글을 모아 두었다.\n"),
    "ai/rrf.md": (
        "---\ntitle: Reciprocal Rank Fusion\n---\n"
        "RRF는 여러 순위 목록을 하나로 합친다. [[graphrag|그래프 RAG]] 파이프라인에서도 마지막 단계로 쓴다.\n\n"
        "Fusion tricks also apply when you cook [[life/kimchi]] for a team dinner.\n\n"
        "## 참고\n\n원 논문은 2009년 SIGIR에 실렸다.\n"),
    "life/kimchi.md": (
        "---\ntitle: 김치찌개 레시피\n---\n"
        "## 재료\n\n돼지 앞다리살 300g, 묵은지 반 포기, 두부 한 모.\n\n"
        "## 참고\n\n[점수 합치는 공식](../ai/rrf.md)을 찌개 간 맞추기에 비유한 적이 있다.\n"),
    "daily/2026-03-01.md": (
        "# 3월 1일\n\n오늘 [[kimchi]] 끓이는 법을 다시 정리했다, 묵은지가 핵심이다.\n\n"
        "[[ai/graphrag]]는 엔티티와 관계를 추출해 커뮤니티 요약을 만든다.\n\n"
        "- [[ai/rrf]]\n- [[ai/graphrag]]\n\n다음 문서: [[ai/rrf]]\n\n"
        "```\n코드 안의 [[ai/rrf]] 링크는 예시일 뿐이고 링크가 아니다\n```\n"),
    "ai/rrf-draft.md": "---\ntitle: RRF 초안\n---\n옛 초안: 그래프 RAG 파이프라인에서도 마지막 단계로 쓴다.\n",
    "index.md": (
        "---\ntitle: Home\ntype: moc\n---\n여기서 시작한다: 먼저 [[ai/graphrag]] 노트를 읽고 나서 나머지를 본다.\n\n"
        "- [[ai/rrf]]\n- [[life/kimchi]]\n"),
}
