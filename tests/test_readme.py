"""The README's tables and the docs' links, checked against what they describe (issue 21).

* README.md's configuration table is the catalogue (``bench/core/configs.py`` ``CONFIGS``):
  every entry once, in catalogue order, with its engine, storage, settings and server
  environment; its "run by default by" column is each job's default list.
* Every list of ``./pgnvm test``'s default configurations in README.md and
  bench/testsuite/README.md is ``settings.DEFAULT_CONFIGS`` + ``WITH_SE2`` (one about
  ``--quick`` may be ``QUICK_CONFIGS`` + ``QUICK_WITH_SE2`` instead).
* README.md's dependency table names exactly ``APT_PACKAGES`` of ``./pgnvm`` and the
  direct dependencies of requirements.txt.
* Every relative link in README.md and docs/**/*.md points to an existing file.
* docs/results/README.md has one line per run (file or directory) under docs/results/.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.core import configs
from bench.micro import settings as micro_settings
from bench.oltp import settings as oltp_settings
from bench.testsuite import settings as test_settings
from bench.tpch import settings as tpch_settings

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
TESTSUITE_README = REPO / "bench" / "testsuite" / "README.md"
RESULTS = REPO / "docs" / "results"
RESULTS_INDEX = RESULTS / "README.md"

#: ``./pgnvm test``'s default plan: always, plus the se2 ones when the server has se2.
TEST_DEFAULTS = (*test_settings.DEFAULT_CONFIGS, *test_settings.WITH_SE2)
#: ``./pgnvm test --quick``'s plan, likewise.
TEST_QUICK = (*test_settings.QUICK_CONFIGS, *test_settings.QUICK_WITH_SE2)

#: The README's "run by default by" column: job -> its default configurations.
JOB_DEFAULTS: dict[str, tuple[str, ...]] = {
    "tpch": tuple(tpch_settings.DEFAULT_CONFIGS),
    "oltp": tuple(oltp_settings.default_configs()),
    "scan": tuple(micro_settings.DEFAULT_CONFIGS),
    "test": TEST_DEFAULTS,
}


# --------------------------------------------------------------------------- Markdown


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]
    line: int  # 1-based line of the header

    def column(self, name: str) -> int:
        return [h.lower() for h in self.header].index(name)


def _without_fences(text: str) -> list[str]:
    """The lines of ``text``, those inside fenced code blocks blanked (numbering kept)."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            out.append("")
            continue
        out.append("" if fenced else line)
    return out


def _cells(line: str) -> list[str]:
    parts = re.split(r"(?<!\\)\|", line.strip())
    return [p.strip() for p in parts[1:-1]]


def tables(text: str) -> list[Table]:
    """Every pipe table of a Markdown text (header, separator, rows)."""
    lines = _without_fences(text)
    found: list[Table] = []
    i = 0
    while i < len(lines):
        if (
            lines[i].lstrip().startswith("|")
            and i + 1 < len(lines)
            and re.fullmatch(r"\s*\|[\s:|-]+\|\s*", lines[i + 1])
        ):
            header, rows, j = _cells(lines[i]), [], i + 2
            while j < len(lines) and lines[j].lstrip().startswith("|"):
                rows.append(_cells(lines[j]))
                j += 1
            found.append(Table(header, rows, i + 1))
            i = j
        else:
            i += 1
    return found


def code_spans(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def sentences(text: str) -> list[str]:
    """The prose of a Markdown text (no code blocks, no tables, no headings) as sentences,
    each paragraph's lines joined."""
    paragraphs, cur = [], []
    for line in _without_fences(text):
        s = line.strip()
        if not s or s.startswith(("|", "#")):
            if cur:
                paragraphs.append(" ".join(cur))
                cur = []
            continue
        cur.append(s)
    if cur:
        paragraphs.append(" ".join(cur))
    out = []
    for p in paragraphs:
        out.extend(re.split(r"(?<=[.!?])\s+(?=[A-Z])", p))
    return out


def catalogue_names(text: str) -> list[str]:
    """Catalogue names in the code spans of ``text`` (``a,b`` spans split), in order,
    each once."""
    names: list[str] = []
    for span in code_spans(text):
        for token in re.split(r"[,\s]+", span):
            if token in configs.BY_NAME and token not in names:
                names.append(token)
    return names


LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def relative_links(path: Path) -> list[tuple[int, str]]:
    """(line, target) of every link of a Markdown file that is not a URL or an anchor;
    code (fenced or inline) is not looked at."""
    out = []
    for n, line in enumerate(_without_fences(path.read_text()), start=1):
        for m in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
            target = m.group(1)
            if re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", target) or target.startswith("#"):
                continue
            out.append((n, target))
    return out


# --------------------------------------------------------------------------- configurations


def config_tables(path: Path) -> list[Table]:
    return [
        t
        for t in tables(path.read_text())
        if t.header and t.header[0].lower() == "configuration" and "engine" in t.header
    ]


def readme_config_table() -> Table:
    found = config_tables(README)
    assert len(found) == 1, (
        f"README.md: expected one configuration table (configuration | engine | ...), "
        f"found {len(found)}"
    )
    return found[0]


def _row_name(table: Table, row: list[str], where: str) -> str:
    names = code_spans(row[0])
    assert len(names) == 1, f"{where}: one `name` per row, got {row[0]!r}"
    return names[0]


def test_readme_config_table_is_the_catalogue() -> None:
    t = readme_config_table()
    where = f"README.md:{t.line}"
    names = [_row_name(t, r, where) for r in t.rows]
    assert len(names) == len(set(names)), f"{where}: a configuration listed twice: {names}"
    missing = [n for n in configs.NAMES if n not in names]
    unknown = [n for n in names if n not in configs.BY_NAME]
    assert not missing and not unknown, (
        f"{where}: the table is not the catalogue: missing {missing}, not in it {unknown}"
    )
    assert names == list(configs.NAMES), f"{where}: not in catalogue order"


def test_readme_config_table_rows_match_their_entries() -> None:
    t = readme_config_table()
    engine, storage = t.column("engine"), t.column("storage")
    own = t.column("its own settings")
    for row in t.rows:
        name = _row_name(t, row, "README.md")
        cfg = configs.BY_NAME[name]
        assert row[engine] == cfg.engine, f"{name}: engine {row[engine]!r}, catalogue {cfg.engine}"
        assert row[storage] == cfg.storage, (
            f"{name}: storage {row[storage]!r}, catalogue {cfg.storage}"
        )
        cell = row[own]
        shown = {s.replace(" ", "") for s in code_spans(cell) if "=" in s}
        expected = {f"{k}={v}" for k, v in {**cfg.settings, **cfg.environment}.items()}
        assert shown == expected, (
            f"{name}: settings shown {sorted(shown)}, catalogue (settings + environment) "
            f"{sorted(expected)}"
        )
        assert ("whole database" in cell) == cfg.sized_to_db, (
            f"{name}: a pool for the whole database said iff the entry has one"
        )
        assert ("prewarm" in cell) == cfg.prewarm, f"{name}: pg_prewarm said iff the entry has it"
        assert ("page cache" in cell) == cfg.drop_caches, (
            f"{name}: the dropped page cache said iff the entry drops it"
        )


def test_readme_default_column_matches_each_jobs_defaults() -> None:
    t = readme_config_table()
    col = t.column("run by default by")
    for row in t.rows:
        name = _row_name(t, row, "README.md")
        shown = {j.strip() for j in row[col].split(",") if j.strip()}
        assert shown <= set(JOB_DEFAULTS), f"{name}: unknown job(s) {shown - set(JOB_DEFAULTS)}"
        expected = {job for job, names in JOB_DEFAULTS.items() if name in names}
        assert shown == expected, (
            f"{name}: default of {sorted(shown)}, really of {sorted(expected)}"
        )
    for job, names in JOB_DEFAULTS.items():
        assert set(names) <= set(configs.NAMES), f"{job}'s defaults are not all in the catalogue"


# --------------------------------------------------------------------------- test defaults


def default_test_lists(path: Path) -> list[tuple[str, list[str]]]:
    """Sentences of ``path`` that list default configurations of ``./pgnvm test``: they
    say "default" and name at least three configurations (README.md: and ./pgnvm test)."""
    found = []
    for s in sentences(path.read_text()):
        if not re.search(r"(?i)\bdefault", s):
            continue
        if path == README and "pgnvm test" not in s:
            continue
        names = catalogue_names(s)
        if len(names) >= 3:
            found.append((s, names))
    return found


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(README, id="README.md"),
        pytest.param(TESTSUITE_README, id="bench/testsuite/README.md"),
    ],
)
def test_default_test_lists_match_settings(path: Path) -> None:
    for sentence, names in default_test_lists(path):
        plans = [set(TEST_DEFAULTS)]
        if re.search(r"(?i)\bquick\b", sentence) and TEST_QUICK:
            plans.append(set(TEST_QUICK))  # a sentence about --quick may list its plan
        assert set(names) in plans, (
            f"{path.relative_to(REPO)}: {sentence!r} names {names}, but ./pgnvm test's "
            f"defaults are {list(TEST_DEFAULTS)} (--quick: {list(TEST_QUICK)}; "
            f"bench/testsuite/settings.py)"
        )


def test_testsuite_config_table_is_the_default_plan() -> None:
    for t in config_tables(TESTSUITE_README):
        engine = t.column("engine")
        names = []
        for row in t.rows:
            name = _row_name(t, row, "bench/testsuite/README.md")
            assert name in configs.BY_NAME, f"{name}: not in the catalogue"
            assert row[engine] == configs.BY_NAME[name].engine, f"{name}: wrong engine"
            names.append(name)
        assert sorted(names) == sorted(TEST_DEFAULTS), (
            f"bench/testsuite/README.md:{t.line}: {names}, defaults {list(TEST_DEFAULTS)}"
        )


# --------------------------------------------------------------------------- dependencies


def apt_packages() -> set[str]:
    text = (REPO / "pgnvm").read_text()
    m = re.search(r"^APT_PACKAGES=\((.*?)^\)", text, re.S | re.M)
    assert m, "pgnvm: no APT_PACKAGES=( ... )"
    words = []
    for line in m.group(1).splitlines():
        words.extend(line.split("#", 1)[0].split())
    return set(words)


def direct_requirements() -> set[str]:
    names = set()
    for line in (REPO / "requirements.txt").read_text().splitlines():
        if line.strip() == "# transitive":
            break
        line = line.split("#", 1)[0].strip()
        if line:
            names.add(re.split(r"[=<>~!;\s]", line, maxsplit=1)[0])
    return names


def dependency_table() -> Table:
    found = [t for t in tables(README.read_text()) if t.header[:2] == ["dependency", "from"]]
    assert len(found) == 1, "README.md: expected one table 'dependency | from | why'"
    return found[0]


def test_readme_dependencies_are_the_packages_installed() -> None:
    t = dependency_table()
    debian, pypi = set(), set()
    for row in t.rows:
        source = row[1]
        if "source package" in source:
            continue  # the PostgreSQL source, fetched with apt-get source
        names = set(code_spans(row[0]))
        assert names, f"README.md: dependency row without a `name`: {row[0]!r}"
        if source.startswith("Debian"):
            debian |= names
        elif source == "PyPI":
            pypi |= names
        else:
            pytest.fail(f"README.md: dependency {row[0]!r} from {source!r}: Debian or PyPI?")
    apt = apt_packages()
    assert debian == apt, (
        f"README.md's Debian dependencies vs pgnvm's APT_PACKAGES: not in the table "
        f"{sorted(apt - debian)}, not installed {sorted(debian - apt)}"
    )
    req = direct_requirements()
    assert pypi == req, (
        f"README.md's PyPI dependencies vs requirements.txt: not in the table "
        f"{sorted(req - pypi)}, not required {sorted(pypi - req)}"
    )


# --------------------------------------------------------------------------- links, results


def markdown_files() -> list[Path]:
    return [README, *sorted((REPO / "docs").rglob("*.md"))]


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_point_to_files(path: Path) -> None:
    broken = []
    for line, target in relative_links(path):
        file = target.split("#", 1)[0]
        if file and not (path.parent / file).exists():
            broken.append(f"{path.relative_to(REPO)}:{line}: {target}")
    assert not broken, "links to nothing:\n" + "\n".join(broken)


def test_results_index_lists_every_run_once() -> None:
    found = [t for t in tables(RESULTS_INDEX.read_text()) if t.header and t.header[0] == "run"]
    assert len(found) == 1, "docs/results/README.md: expected one index table 'run | ...'"
    listed = []
    for row in found[0].rows:
        targets = [m.group(1) for m in LINK.finditer(row[0])]
        assert len(targets) == 1, f"docs/results/README.md: one link per run, got {row[0]!r}"
        listed.append(targets[0].split("/", 1)[0])
    runs = sorted(p.name for p in RESULTS.iterdir() if p.name != "README.md")
    assert len(listed) == len(set(listed)), f"a run listed twice: {sorted(listed)}"
    assert sorted(listed) == runs, (
        f"docs/results/README.md: not listed {sorted(set(runs) - set(listed))}, "
        f"listed but absent {sorted(set(listed) - set(runs))}"
    )


# --------------------------------------------------------------------------- why each cell runs


def test_why_table_covers_every_check_and_default_configuration() -> None:
    """bench/testsuite/README.md's "Why each configuration x check runs": one row per check
    of the registry (in its order), one column per default configuration (``nvm_``
    dropped), every cell one of the documented codes."""
    from bench.testsuite import registry

    text = TESTSUITE_README.read_text()
    part = text.split("## Why each configuration × check runs", 1)[1].split("\n## ", 1)[0]
    lines = [ln for ln in part.splitlines() if ln.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines[2:]]
    assert head[0] == "check"
    assert ["nvm_" + h for h in head[1:]] == list(TEST_DEFAULTS), head
    own = [g.name for g in registry.GLOBAL_CHECKS if g.name in registry.OWN_TASK]
    assert [r[0] for r in rows] == [c.name for c in registry.ENGINE_CHECKS] + own
    codes = {"ref", "eng", "wal", "dat", "pf", "ctl", "hyb", "skip"}
    for r in rows:
        assert len(r) == len(head), r
        for cell in r[1:]:
            words = cell.split("(")[0].split()
            assert words and set(words) <= codes, f"{r[0]}: {cell!r}"
