"""Queries the small vault answers (IN) and does not (OUT), for gate tests."""

QUERIES_IN = ["김치찌개 레시피", "GraphRAG 커뮤니티 요약", "RRF 점수 k 값", "그래프 RAG 엔티티 추출", "돼지 앞다리살 두부"]
QUERIES_OUT = ["양자 컴퓨터 큐비트 오류 정정", "LightRAG 설치", "축구 월드컵 우승국", "파리 에펠탑 높이", "주식 배당금 세금"]
