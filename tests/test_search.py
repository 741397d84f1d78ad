"""SPEC §6.6 search behaviours, pinned on a small hand-made index."""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Collection

import pytest

from bench.search_eval import catalogs_dir, load_catalog, load_queries
from proxy.search import SearchDoc, SearchIndex, doc_from_tool, tokenize
from proxy.search import _clauses as clauses
from proxy.search import _documents as documents
from proxy.search import _index as search
from proxy.search import _postings as postings
from proxy.search._stemming import split_values, stem
from proxy.text import split_clauses


def doc(server: str, tool: str, description: str = "", params: tuple[str, ...] = ()) -> SearchDoc:
    return SearchDoc(f"{server}__{tool}", server, tool, description, params)


GITHUB = [
    doc("github", "create_issue", "Create a new issue in a repository", ("owner", "repo", "title")),
    doc("github", "create_pull_request", "Open a pull request", ("owner", "repo", "head")),
    doc("github", "list_pull_requests", "List pull requests of a repository"),
    doc("github", "search_users", "Search for users"),
]


@pytest.fixture
def index() -> SearchIndex:
    idx = SearchIndex()
    idx.set_server("github", GITHUB)
    idx.set_server(
        "fs",
        [
            doc("fs", "readFile", "Read the contents of a file", ("path",)),
            doc("fs", "write_file", "Write text to a file", ("path", "content")),
        ],
    )
    return idx


def test_tokenize_stems_and_splits_camel_case() -> None:
    assert tokenize("readFile") == ["read", "file"]
    assert tokenize("creating created creates") == ["creat"] * 3
    assert tokenize("HTTPServer get_issue-list.v2") == ["http", "server", "get", "issu", "list", "v2"]


def test_news_is_not_new() -> None:
    """Porter2's invariant words stay whole: "news" would otherwise meet every "Create a new ..." tool."""
    assert tokenize("news new newest") == ["news", "new", "newest"]
    assert tokenize("atlas bias cosmos") == ["atlas", "bias", "cosmos"]


def test_stemming_matches_inflections(index: SearchIndex) -> None:
    assert index.search("creating issues", limit=1) == ["github__create_issue"]


def test_camel_case_name_is_searchable(index: SearchIndex) -> None:
    assert index.search("read file", limit=1) == ["fs__readFile"]


def test_unknown_terms_are_ignored(index: SearchIndex) -> None:
    assert index.search("zyzzyva frobnicate issue", limit=1) == ["github__create_issue"]
    assert index.search("zyzzyva frobnicate", limit=5) == []
    assert index.search("", limit=5) == []


def test_an_unknown_word_completes_to_the_indexed_terms_it_begins_as_the_fleet_changes() -> None:
    index = SearchIndex()
    index.set_server("web", [doc("web", "screenshot", "Capture the page"), doc("web", "scrape", "Fetch a page")])
    assert index.search("screensh", limit=5) == ["web__screenshot"]  # no indexed term is "screensh"
    index.set_server("os", [doc("os", "screensaver", "Start the saver")])
    assert sorted(index.search("screens", limit=5)) == ["os__screensaver", "web__screenshot"]
    index.remove_server("web")
    assert index.search("screens", limit=5) == ["os__screensaver"]
    assert index.search("scre", limit=5) == ["os__screensaver"]


def test_exact_names_the_whole_query_within_scope(index: SearchIndex) -> None:
    assert index.exact(" Write_File ") == ["fs__write_file"]
    assert index.exact("write_file", scope={"fs__readFile"}) == []
    assert index.exact("write file") == []


def test_exact_name_ranks_first(index: SearchIndex) -> None:
    assert index.search("list_pull_requests", limit=1) == ["github__list_pull_requests"]
    assert index.search("github__create_pull_request", limit=1) == ["github__create_pull_request"]
    assert index.search("write_file", limit=1) == ["fs__write_file"]


def test_scope_filters_results(index: SearchIndex) -> None:
    scope = {"github__list_pull_requests", "fs__readFile"}
    assert index.search("pull request", limit=5, scope=scope) == ["github__list_pull_requests"]
    assert index.search("create_issue", limit=5, scope=scope) == []


def test_ties_keep_name_order() -> None:
    idx = SearchIndex()
    idx.set_server("b", [doc("b", "ping", "Ping it")])
    idx.set_server("a", [doc("a", "ping", "Ping it")])
    assert idx.search("ping", limit=5) == ["a__ping", "b__ping"]
    assert idx.search("ping it please", limit=5) == ["a__ping", "b__ping"]


def test_a_raw_name_two_servers_share_stays_exact_for_the_one_left() -> None:
    idx = SearchIndex()
    for server in ("b", "a", "c"):
        idx.set_server(server, [doc(server, "ping", "Ping it")])
    assert idx.exact("ping") == ["a__ping", "b__ping", "c__ping"]
    idx.remove_server("a")
    idx.remove_server("c")
    assert idx.exact("ping") == ["b__ping"] == idx.exact("B__PING")
    idx.remove_server("b")
    assert idx.exact("ping") == []


def test_acronym_of_shared_name_words(index: SearchIndex) -> None:
    assert index.search("open PR", limit=1) == ["github__create_pull_request"]


def test_set_server_replaces_and_remove_server_drops(index: SearchIndex) -> None:
    assert len(index) == 6
    index.set_server("fs", [doc("fs", "delete_file", "Delete a file", ("path",))])
    assert len(index) == 5
    assert index.search("write", limit=5) == []
    assert index.search("delete file", limit=1) == ["fs__delete_file"]
    index.remove_server("fs")
    assert len(index) == 4
    assert index.search("file", limit=5) == []
    assert index.search("delete_file", limit=5) == []
    index.remove_server("nope")
    assert index.search("users", limit=5) == ["github__search_users"]


def test_update_matches_fresh_build(index: SearchIndex) -> None:
    index.set_server("fs", [doc("fs", "stat", "File metadata")])
    fresh = SearchIndex()
    fresh.set_server("fs", [doc("fs", "stat", "File metadata")])
    fresh.set_server("github", GITHUB)
    for query in ("file", "pull request repository", "issue"):
        assert index.search(query, limit=10) == fresh.search(query, limit=10)


def test_a_server_s_evidence_counts_only_the_tools_a_session_can_see() -> None:
    """A word only a hidden tool of the server has adds nothing to a visible tool's score in a scoped search."""
    index = SearchIndex()
    index.set_server("s", [doc("s", "alpha", "Alpha report"), doc("s", "hidden", "Secret payroll export")])
    index.set_server("t", [doc("t", "beta", "Beta report")])
    scope = frozenset({"s__alpha", "t__beta"})
    assert index.search_scored("report payroll", limit=5, scope=scope) == index.search_scored(
        "report", limit=5, scope=scope)
    unscoped = dict(index.search_scored("report payroll", limit=5))
    assert unscoped["s__alpha"] > dict(index.search_scored("report", limit=5))["s__alpha"]


def test_limit_zero_and_empty_index() -> None:
    assert SearchIndex().search("anything", limit=5) == []


def test_doc_from_tool_tolerates_junk() -> None:
    good = doc_from_tool("s__t", "s", "t", "desc", {"type": "object", "properties": {"a": {}, "b": {}}})
    assert good.params == ("a", "b")
    assert doc_from_tool("s__t", "s", "t", None, None).params == ()
    assert doc_from_tool("s__t", "s", "t", "d", {"properties": ["x"]}).params == ()
    assert doc_from_tool("s__t", "s", "t", 42, "junk").description == ""  # type: ignore[arg-type]


def test_synonyms_find_tools_named_otherwise(index: SearchIndex) -> None:
    assert index.search("erase", limit=5) == []  # no delete tool: synonyms never invent matches
    index.set_server("fs", [doc("fs", "delete_file", "Delete a file", ("path",)), doc("fs", "stat", "File info")])
    assert index.search("erase the file", limit=1) == ["fs__delete_file"]
    assert index.search("find developer accounts", limit=1) == ["github__search_users"]


def test_literal_match_outranks_synonym() -> None:
    idx = SearchIndex()
    idx.set_server("s", [doc("s", "add_row", "Add a row"), doc("s", "insert_row", "Insert a row")])
    assert idx.search("insert row", limit=2) == ["s__insert_row", "s__add_row"]
    assert idx.search("add row", limit=2) == ["s__add_row", "s__insert_row"]


def test_camel_case_brand_matches_whole_word() -> None:
    idx = SearchIndex()
    idx.set_server("s", [doc("s", "search_users", "Search for users on GitHub"), doc("s", "ping", "Ping a host")])
    assert idx.search("github", limit=5) == ["s__search_users"]


def test_tool_whose_name_the_query_covers_ranks_first(index: SearchIndex) -> None:
    assert index.search("list pull requests", limit=1) == ["github__list_pull_requests"]
    assert index.search("show pull requests", limit=1) == ["github__list_pull_requests"]


def test_short_limit_is_prefix_of_long_limit(index: SearchIndex) -> None:
    for query in ("pull request", "show pull requests", "create", "file", "search users repository"):
        full = index.search(query, limit=20)
        for k in range(1, len(full) + 1):
            assert index.search(query, limit=k) == full[:k], (query, k)


def test_cached_scores_follow_updates(index: SearchIndex) -> None:
    before = index.search("file", limit=5)
    index.set_server("fs", [doc("fs", "stat", "File metadata")])
    assert before != index.search("file", limit=5) == ["fs__stat"]


def test_term_caches_stay_bounded_and_answers_stay_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    def build() -> SearchIndex:
        idx = SearchIndex()
        idx.set_server("github", GITHUB)
        idx.set_server("fs", [doc("fs", "readFile", "Read the contents of a file", ("path",))])
        return idx

    queries = ["file", "pull request", "issue repository", "read", "users", "file", "open PR contents"] * 2
    monkeypatch.setattr(postings, "TERM_CACHE_BYTES", 0)  # only the latest term's arrays stay
    bounded = build()
    answers = [bounded.search(query, limit=5) for query in queries]
    assert len(bounded._impacts_cache) == len(bounded._arrays) == 1
    monkeypatch.setattr(postings, "TERM_CACHE_BYTES", 1 << 30)
    unbounded = build()
    assert answers == [unbounded.search(query, limit=5) for query in queries]
    assert len(unbounded._impacts_cache) > 10


class _Reference:
    """Straightforward BM25F over dicts, per document and term, as search.py scored before its postings
    became arrays; shares only tokenizing and query expansion with the index."""

    def __init__(self, servers: dict[str, list[SearchDoc]]) -> None:
        self.tfs: dict[str, dict[str, tuple[int, ...]]] = {}
        self.lengths: dict[str, tuple[int, ...]] = {}
        self.servers = {server: [d.name for d in docs] for server, docs in servers.items()}
        for docs in servers.values():
            boilerplate, acronyms = documents.server_boilerplate(docs), documents.name_acronyms(docs)
            for d in docs:
                self.tfs[d.name], self.lengths[d.name] = documents.field_counts(d, boilerplate, acronyms)

    def scores(self, terms: dict[str, float], scope: Collection[str] | None) -> dict[str, float]:
        n, ranking = len(self.tfs), search.RANKING
        avgs = [max(sum(lengths[f] for lengths in self.lengths.values()) / n, 1e-9) for f in range(len(search.FIELDS))]
        parts: dict[str, list[float]] = {}
        for term, qtf in terms.items():
            holders = [name for name, tfs in self.tfs.items() if term in tfs]
            idf = min(qtf, ranking.repeats) * math.log(1 + (n - len(holders) + 0.5) / (len(holders) + 0.5))
            for name in holders:
                tf = 0.0
                for count, w, b, length, avg in zip(
                    self.tfs[name][term], ranking.weights, ranking.b, self.lengths[name], avgs, strict=True
                ):
                    tf += count * (w / (1 - b + b * length / avg))
                if scope is None or name in scope:
                    parts.setdefault(name, []).append(idf * (tf * (ranking.k1 + 1) / (tf + ranking.k1)))
        return {name: sum(sorted(found, reverse=True)[: ranking.best_terms]) for name, found in parts.items()}

    def server_evidence(self, terms: dict[str, float], names: list[str]) -> float:
        """Per query term, the share of the server's tools (`names`, those in scope) that have it times its idf
        over servers (all of them)."""
        total = 0.0
        for term, qtf in terms.items():
            spread = sum(any(term in self.tfs[n] for n in others) for others in self.servers.values())
            if spread:
                idf = qtf * math.log(1 + (len(self.servers) - spread + 0.5) / (spread + 0.5))
                total += idf * sum(term in self.tfs[n] for n in names)
        return total / max(len(names), 1)

    def search(self, index: SearchIndex, query: str, limit: int, scope: Collection[str] | None) -> list[str]:
        """Every match boosted by name coverage, then sorted: no pruning at all."""
        terms = index._query_terms(query)
        exact = index.exact(query, scope)
        long_query = max(1, sum(w >= 1 for w in terms.values()))
        weight = search.RANKING.name_coverage * min(1.0, search.COVERAGE_WORDS / long_query)
        scores = self.scores(terms, scope)
        for names in self.servers.values():
            evidence = self.server_evidence(terms, [n for n in names if scope is None or n in scope])
            for name in names:
                if name in scores:
                    scores[name] += search.RANKING.server_evidence * evidence
        boosted = {}
        for name, score in scores.items():
            name_terms = index._entries[name].name_terms
            covered = sum(min(1.0, terms.get(t, 0.0)) for t in name_terms) / max(len(name_terms), 1)
            boosted[name] = score * (1 + weight * covered)
        ranked = sorted((kv for kv in boosted.items() if kv[0] not in exact), key=lambda kv: (-kv[1], kv[0]))
        return (exact + [name for name, _ in ranked])[:limit]


def test_completions_are_every_indexed_term_a_prefix_begins_on_real_fleet() -> None:
    root = catalogs_dir()
    if not (root / "real-fleet.json").exists():
        pytest.skip(f"catalogs not found at {root} (set TOOLBRIDGE_CATALOGS, or restore bench/catalogs)")
    index = SearchIndex()
    for server, docs in load_catalog(root / "real-fleet.json").items():
        index.set_server(server, docs)
    terms = list(index._postings)
    rnd = random.Random(7)
    prefixes = {t[:n] for t in rnd.sample(terms, 300) for n in (1, 4, 6)} | {"zzzz", "a", "~", "", "\U0010ffff"}
    for prefix in prefixes:
        assert index._completions(prefix) == sorted(t for t in terms if t.startswith(prefix)), prefix


def test_array_scoring_matches_reference_on_real_fleet() -> None:
    root = catalogs_dir()
    if not (root / "real-fleet.json").exists():
        pytest.skip(f"catalogs not found at {root} (set TOOLBRIDGE_CATALOGS, or restore bench/catalogs)")
    servers = load_catalog(root / "real-fleet.json")
    index = SearchIndex()
    for server, docs in servers.items():
        index.set_server(server, docs)
    for server in list(servers)[::3]:  # updates reuse freed document ids in another order
        index.remove_server(server)
    for server in list(servers)[::3][::-1]:
        index.set_server(server, servers[server])
    reference = _Reference(servers)
    rnd = random.Random(5)
    names = [d.name for docs in servers.values() for d in docs]
    words = [w for name in names for w in name.split("__")[1].replace("-", "_").split("_") if w]
    queries = [q["query"] for q in load_queries(root / "queries-dev.json")]
    queries += [" ".join(rnd.sample(words, rnd.randint(1, 5))) for _ in range(60)] + names[:5]
    scopes = [None, frozenset(names[::10]), set(rnd.sample(names, 40))]
    for query in queries:
        for limit in (1, 5, 10, 50):
            for scope in scopes:
                expected = reference.search(index, query, limit, scope)
                assert index.search(query, limit=limit, scope=scope) == expected, (query, limit, scope is None)


def test_a_word_repeated_past_255_times_in_a_field_counts_in_full() -> None:
    """Counts are stored in one byte where they fit; a server where one does not keeps them exact."""
    docs = [doc("s", "a", "spam " * 300), doc("s", "b", "spam " * 256), doc("s", "c", "spam eggs")]
    index = SearchIndex()
    index.set_server("s", docs)
    terms = index._query_terms("spam")
    expected = _Reference({"s": docs}).scores(terms, None)
    scores = index._score(terms, None)
    assert {name: scores[index._entries[name].doc_id] for name in expected} == expected
    assert expected["s__a"] != expected["s__b"]


def test_parameter_descriptions_and_short_enum_values_are_searchable() -> None:
    schema = {"properties": {"selector": {"description": "CSS selector of an iframe"},
                             "format": {"enum": ["png", "jpeg", "x" * 40]}, "junk": "not a schema"}}
    index = SearchIndex()
    index.set_server("web", [doc_from_tool("web__act", "web", "act", "Act on the page", schema),
                             doc_from_tool("web__other", "web", "other", "Something else", {})])
    assert index.search("iframe", limit=5) == index.search("jpeg", limit=5) == ["web__act"]
    assert index.search("x" * 40, limit=5) == []


def test_a_parameter_description_most_of_a_server_shares_adds_nothing() -> None:
    shared = {"properties": {"tenant": {"description": "The directory identifier to authenticate against"}}}
    docs = [doc_from_tool(f"az__t{i}", "az", f"t{i}", f"Tool number {i}", shared) for i in range(12)]
    index = SearchIndex()
    index.set_server("az", docs)
    assert index.search("directory identifier", limit=5) == []


def test_a_request_splits_into_clauses_at_commas_sentence_ends_and_step_words() -> None:
    request = "Open the repo, read its README and then open an issue; also label it. Plus a comment"
    assert split_clauses(request) == ["Open the repo", "read its README", "open an issue", "label it.", "a comment"]
    assert split_clauses("android and ios") == ["android", "ios"]
    assert split_clauses("handle the brand") == ["handle the brand"]  # "and" inside a word splits nothing


def test_balancing_clauses_weighs_a_short_step_like_a_long_one() -> None:
    request = "list the open merge requests of the infra terraform project, then approve it"
    terms = {stem(w): 1.0 for w in ("list", "open", "merge", "requests", "infra", "terraform", "project", "approve")}
    terms["pull"] = 0.3  # a synonym: from no clause word
    balanced = clauses.balance_clauses(terms, request, 0.5)
    assert balanced[stem("approve")] == 1.0  # the shortest clause keeps its weight
    assert balanced[stem("terraform")] == pytest.approx(7**-0.5)  # a clause of 7 content words
    assert balanced["pull"] == 0.3
    assert clauses.balance_clauses(terms, "approve the terraform one, then list", 0.5) == terms  # too short
    assert clauses.balance_clauses(terms, request, 0.0) == terms


def test_a_word_in_two_clauses_counts_at_its_shorter_clause() -> None:
    request = "find the failing deploy job of the nightly pipeline run, then rerun the job"
    balanced = clauses.balance_clauses({stem("job"): 1.0, stem("nightly"): 1.0}, request, 0.5)
    assert balanced[stem("job")] == 1.0  # also in "rerun the job", the shortest clause
    assert balanced[stem("nightly")] == pytest.approx(7**-0.5 / 2**-0.5)  # 7 content words against 2


MERGE_REQUESTS = [
    doc("gitlab", "list_merge_requests", "List the open merge requests of a project, with their labels and authors"),
    doc("gitlab", "get_merge_request", "Show one merge request of a project: its labels, authors and state"),
    doc("gitlab", "list_labels", "List the labels of a project"),
    doc("gitlab", "list_project_members", "List the members and authors of a project"),
    doc("gitlab", "approve_merge_request", "Approve a merge request"),
]
STEPS = "Show the open merge requests of the infra project with their labels and authors, then approve it"


def test_the_fused_lexical_leg_ranks_the_tool_of_a_short_step_higher() -> None:
    index = SearchIndex()
    index.set_server("gitlab", MERGE_REQUESTS)
    assert index.search(STEPS, limit=5).index("gitlab__approve_merge_request") == 2
    assert index.scored(STEPS, limit=5)[0][0] == "gitlab__approve_merge_request"


def test_lexical_search_never_balances_clauses() -> None:
    index = SearchIndex(dataclasses.replace(search.RANKING, clause_balance=0.0))
    index.set_server("gitlab", MERGE_REQUESTS)
    unbalanced = [name for name, _ in index.scored(STEPS, limit=5)]
    assert unbalanced == index.search(STEPS, limit=5)
    index.retune(search.RANKING)
    assert index.search(STEPS, limit=5) == unbalanced


EXCEL_TASK = ("Start a new Excel workbook plan.xlsx, write the monthly targets into A1:M2, and add a pivot table "
              "summarising sales by region.")


def _real_fleet(ranking: search.Ranking) -> SearchIndex:
    root = catalogs_dir()
    if not (root / "real-fleet.json").exists():
        pytest.skip(f"catalogs not found at {root} (set TOOLBRIDGE_CATALOGS, or restore bench/catalogs)")
    index = SearchIndex(ranking)
    for server, docs in load_catalog(root / "real-fleet.json").items():
        index.set_server(server, docs)
    return index


def test_a_multi_step_request_ranks_a_tool_for_each_step() -> None:
    """Ranked on its words alone, the pivot-table step fills the top ten with pivot, slicer and sheet tools and
    the short step's tool (write the targets into A1:M2) is not among them; covering each step brings it third."""
    assert clauses.steps_of(EXCEL_TASK) == [
        "Start a new Excel workbook plan.xlsx", "write the monthly targets into A1:M2",
        "add a pivot table summarising sales by region."]
    undiversified = _real_fleet(dataclasses.replace(search.RANKING, step_diversity=0.0))
    assert "excel__write_range" not in undiversified.search(EXCEL_TASK, limit=10)
    index = _real_fleet(search.RANKING)
    ranked = index.search(EXCEL_TASK, limit=40)
    assert ranked[:3] == ["excel__add_slicer", "excel__create_pivot_table", "excel__write_range"]
    for limit in (1, 3, 5, 10, 30, 31):  # a shorter ranking is the start of a longer one
        assert index.search(EXCEL_TASK, limit=limit) == ranked[:limit]
    assert len(set(ranked)) == 40


def test_a_short_request_or_one_of_a_single_step_is_ranked_as_before() -> None:
    assert clauses.steps_of("write the monthly targets into A1:M2, then add a pivot table") == []  # < 10 words
    assert len(clauses.steps_of(EXCEL_TASK + " Thanks")) == 3  # a clause of one content word is no step
    many = ", ".join(f"create issue {n} in the repo" for n in range(3000))
    assert clauses.steps_of(many) == [f"create issue {n} in the repo" for n in range(clauses.MAX_STEPS)]
    one_step = ("add a pivot table summarising the monthly sales targets of each product line for every region "
                "in the country")
    assert len(clauses.steps_of(one_step)) == 1
    undiversified = _real_fleet(dataclasses.replace(search.RANKING, step_diversity=0.0))
    assert _real_fleet(search.RANKING).search_scored(one_step, limit=10) == undiversified.search_scored(one_step,
                                                                                                        limit=10)


def test_emails_and_quoted_text_are_values_too_and_an_email_domain_is_no_file() -> None:
    text, values = split_values("send 'Invoice 1043' to bob@corp.com and type \"hi there\" into `notes.md`")
    assert values == [
        ("email", "bob@corp.com", ""),
        ("quoted", "'Invoice 1043'", ""),
        ("quoted", '"hi there"', ""),
        ("quoted", "`notes.md`", ""),
    ]
    assert text.split() == ["send", "to", "and", "type", "into"]
    assert split_values("what's on Dana's calendar")[1] == []  # apostrophes quote nothing


QUOTED = [
    SearchDoc("browser__click", "browser", "click", "Click an element on the page.", ("element",)),
    SearchDoc("orders__cancel_order", "orders", "cancel_order", "Cancel an order.", ("order_id",)),
]


def test_quoted_text_weighs_less_than_the_request_s_own_words() -> None:
    index = SearchIndex()
    for doc in QUOTED:
        index.set_server(doc.server, [doc])
    assert index.search("click the 'Cancel order' button", limit=1) == ["browser__click"]
    unquoted = SearchIndex(dataclasses.replace(search.RANKING, quoted=1.0))
    for doc in QUOTED:
        unquoted.set_server(doc.server, [doc])
    assert unquoted.search("click the 'Cancel order' button", limit=1) == ["orders__cancel_order"]


def test_a_value_s_trailing_punctuation_is_the_sentence_s_and_a_folder_can_name_the_file_kind() -> None:
    assert split_values("summarise /root/markdown/cv.md. Then stop")[1] == [
        ("file", "/root/markdown/cv.md", "md markdown")
    ]
    assert split_values("open https://example.com/a, then /data/excel/q3 and ~/word/")[1] == [
        ("url", "https://example.com/a", ""),
        ("file", "/data/excel/q3", "excel"),
        ("file", "~/word/", "word"),
    ]


def test_urls_and_paths_are_taken_out_of_a_request_with_their_kind_and_extension() -> None:
    text, values = split_values("read /etc/nginx/nginx.conf, open https://example.com/a.html and attach cv.pdf, e.g. x")
    assert values == [
        ("url", "https://example.com/a.html", "html"),
        ("file", "/etc/nginx/nginx.conf", "conf"),
        ("file", "cv.pdf", "pdf"),
    ]
    assert text.split() == ["read", ",", "open", "and", "attach", ",", "e.g.", "x"]


FILES = [
    SearchDoc("fs__read_file", "fs", "read_file", "Read a file from disk.", ("path",), ("The file to read.",)),
    SearchDoc("ci__get_build_output", "ci", "get_build_output", "Read the output of a build.", ("build",)),
    SearchDoc("docs__read_word_document", "docs", "read_word_document", "Read a Word document.", ("path",)),
]


def test_the_words_of_a_path_are_literals_and_its_kind_and_extension_count() -> None:
    index = SearchIndex()
    for doc in FILES:
        index.set_server(doc.server, [doc])
    assert index.search("read ./build/output.log", limit=1) == ["fs__read_file"]
    assert index.search("read ./build/output.docx", limit=1) == ["docs__read_word_document"]
    literal = SearchIndex(dataclasses.replace(search.RANKING, literals=1.0, value_kinds=0.0))
    for doc in FILES:
        literal.set_server(doc.server, [doc])
    assert literal.search("read ./build/output.log", limit=1) == ["ci__get_build_output"]
