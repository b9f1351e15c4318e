"""The figures README.md and docs/*.md quote are recomputed from the recorded results
(and, for the variants' tables, from the registry); the test fails when a quoted
figure and its source differ at the precision the figure is printed with.

How a figure is marked in the Markdown source (the marks do not show on the page):

1. A checked table: the line `<!-- checked: SOURCES -->` just above a table, where
   SOURCES are files of results/ (`results/dtype_op.json`, several separated by
   spaces) or `softmax_lab.variants`.  Key columns say what a row is about:
   `shape` (`4096 × 393216`), `dtype` and `op` pick one run of the results files;
   `candidate` a candidate of a profile file; `variant` a registered variant.
   Every other column is recomputed, by its name:

   auto, torch, torch.compile, quack   time ÷ the floor of the op (report.dtype_op_rows);
                                        `-` where the op has no such peer, `fail` or
                                        `skip` where the peer failed or was skipped
   best peer                            the fastest peer's time ÷ floor and its name,
                                        `1.30 (quack.softmax)` (report.grid_rows)
   auto ÷ best peer                     (report.grid_rows)
   N columns, model                     profile files: the candidate's device-memory
                                        reads, in passes over the tensor, at rows of N,
                                        and the traffic model's reads
   DTYPE OP                             `shape` rows of softmax_lab.variants: the variant
                                        auto picks on the H200 of results/ (variants.choose)
   kernel, reads + writes, bytes per float32 element, GB at 4096 × 393216, needs,
   a dtype, an op (yes / no)            `variant` rows: the registry's entry

2. A figure in a sentence: the figure, then `<!-- results/FILE.json: QUERY -->` on the
   same line.  QUERY is a shape, dtype and op (each optional: they must pick one run)
   and one of the column names above, or one of the whole file: `within 3 %` (`N of M`
   shapes where auto ÷ best peer is at most 1.03), `shape` (the file's one shape) or
   `recorded` (the day it was recorded).

Besides, every decimal number in README.md is either checked this way or listed in
NOT_FIGURES (versions and sizes, which are not results).
"""

import functools
import re
from pathlib import Path

import pytest

import softmax_lab
from softmax_lab.lab import candidates, profile, records, report
from softmax_lab.problem import ALL_OPS, DTYPES
from softmax_lab.variants import choose

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCUMENTS = [README, *sorted((ROOT / "docs").glob("*.md"))]
TABLE_MARK = re.compile(r"^<!-- checked: (.+?) -->$")
FIGURE_MARK = re.compile(r"<!-- (results/\S+?\.json): (.+?) -->")
SHAPE = re.compile(r"(\d+) [×x] (\d+)")
ROLES = {"auto": "auto", "torch": "torch", "torch.compile": "compile", "quack": "quack"}
KEYS = ("shape", "dtype", "op", "candidate", "variant")
# Decimal numbers in README.md that are not results: versions and sizes.
NOT_FIGURES = ("Python 3.11+", "quack-kernels 0.6.5", "torch 2.11", "about 0.7 GB", "1.5 MiB a row",
               "6.4 GB in, 6.4 GB out", "1.00 is the floor")


# ------------------------------------------------------------ sources
@functools.cache
def load(source: str) -> dict:
    """A results or profile document of results/, by its path from the repository root."""
    path = ROOT / source
    try:
        return records.load(path)
    except ValueError:
        return profile.load(path)


def like(value: float, written: str) -> str:
    """value printed with as many decimals as the last number in `written`."""
    numbers = re.findall(r"\d+(?:\.(\d+))?", written)
    return f"{value:.{len(numbers[-1]) if numbers else 2}f}"


def one_run(docs: list[dict], keys: dict) -> dict:
    runs = [run for doc in docs for run in doc["runs"]
            if keys.get("shape", tuple(run["shape"])) == tuple(run["shape"])
            and keys.get("dtype", run["dtype"]) == run["dtype"]
            and keys.get("op", run.get("op", "softmax")) == run.get("op", "softmax")]
    assert len(runs) == 1, f"{keys} picks {len(runs)} runs, not one"
    return runs[0]


def results_cell(run: dict, column: str, written: str) -> str:
    """What a column of a results run reads, printed as `written` is."""
    if column in ROLES:
        (row,) = report.dtype_op_rows({"runs": [run]})
        if ROLES[column] not in row["cells"]:
            return "-"
        value, why = row["cells"][ROLES[column]]
        if value is not None:
            return like(value, written)
        return "skip" if why.startswith("skipped") else "fail" if why.startswith("failed") else "-"
    (grid,) = report.grid_rows({"runs": [run]})
    if column == "best peer":
        return f"{like(grid['peer'], written)} ({grid['peer_name']})" if grid["peer"] else "-"
    if column == "auto ÷ best peer":
        return like(grid["auto_vs_peer"], written) if grid["auto_vs_peer"] else "-"
    raise AssertionError(f"no such column of a results table: {column!r}")


def profile_cell(docs: list[dict], keys: dict, column: str, written: str) -> str:
    if column == "model":
        (reads,) = {r["model"]["reads"] for doc in docs for run in doc["runs"] for r in run["candidates"]
                    if r["name"] == keys["candidate"]}
        return str(reads)
    cols = re.fullmatch(r"(\d+) columns", column)
    assert cols, f"no such column of a profile table: {column!r}"
    (run,) = [run for doc in docs for run in doc["runs"] if run["shape"][1] == int(cols[1])]
    r = next((r for r in run["candidates"] if r["name"] == keys["candidate"]), None)
    return like(r["measured_passes"]["reads"], written) if r and r["measured_passes"] else "-"


def variants_cell(keys: dict, column: str, written: str) -> str:
    if "shape" in keys:
        dtype, op = column.split()
        return choose(*keys["shape"], candidates.reference_device(), dtype, op).name
    v = softmax_lab.get_variant(keys["variant"])
    cells = {"kernel": f"kernels/{v.source}", "reads + writes": f"{v.reads} + {v.writes}",
             "bytes per float32 element": str(v.bytes_per_element()),
             "GB at 4096 × 393216": like(v.traffic_bytes(4096, 393216) / 1e9, written),
             "needs": f"sm_{v.min_compute_capability}" if v.min_compute_capability else "any"}
    cells |= {d: "yes" if d in v.dtypes else "no" for d in DTYPES}
    cells |= {op: "yes" if op in v.ops else "no" for op in ALL_OPS}
    assert column in cells, f"no such column of a variants table: {column!r}"
    return cells[column]


def expected(sources: list[str], keys: dict, column: str, written: str) -> str:
    """What a figure should read: the column of the sources for the keys, printed as `written` is."""
    if sources == ["softmax_lab.variants"]:
        return variants_cell(keys, column, written)
    docs = [load(s) for s in sources]
    if "candidate" in keys:
        return profile_cell(docs, keys, column, written)
    if column == "within 3 %":
        rows = [g for doc in docs for g in report.grid_rows(doc)]
        return f"{sum(g['auto_vs_peer'] is not None and g['auto_vs_peer'] <= 1.03 for g in rows)} of {len(rows)}"
    if column == "shape":
        (shape,) = {tuple(run["shape"]) for doc in docs for run in doc["runs"]}
        return f"{shape[0]} × {shape[1]}"
    if column == "recorded":
        (doc,) = docs
        return doc["created"][:10]
    return results_cell(one_run(docs, keys), column, written)


# ------------------------------------------------------------ the marks
def clean(cell: str) -> str:
    return cell.replace("`", "").replace("**", "").strip()


def key(name: str, text: str):
    if name == "shape":
        m = SHAPE.fullmatch(text)
        assert m, f"a shape reads `rows × cols`; got {text!r}"
        return int(m[1]), int(m[2])
    return text


def cells(line: str) -> list[str]:
    return [clean(c) for c in line.strip().strip("|").split("|")]


def checked_tables(path: Path):
    """(line number, sources, {key: value}, column, written cell) of every checked table's value cells."""
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines):
        mark = TABLE_MARK.match(line)
        if not mark:
            continue
        assert lines[i + 1].startswith("|") and set(lines[i + 2]) <= set("|-: "), \
            f"{path.name}:{i + 1}: a checked mark stands just above a table"
        header = cells(lines[i + 1])
        j = i + 3
        while j < len(lines) and lines[j].startswith("|"):
            row = dict(zip(header, cells(lines[j]), strict=True))
            keys = {k: key(k, row[k]) for k in KEYS if k in row}
            for column, written in row.items():
                if column not in KEYS:
                    yield j + 1, mark[1].split(), keys, column, written
            j += 1


def marked_figures(path: Path):
    """(line number, source, {key: value}, column, the text before the mark) of every marked figure."""
    for n, line in enumerate(path.read_text().splitlines(), 1):
        for mark in FIGURE_MARK.finditer(line):
            query, keys = mark[2], {}
            shape = SHAPE.match(query)
            if shape:
                keys["shape"] = int(shape[1]), int(shape[2])
                query = query[shape.end():]
            words = query.split()
            if words and words[0] in DTYPES:
                keys["dtype"] = words.pop(0)
            if words and words[0] in ALL_OPS:
                keys["op"] = words.pop(0)
            yield n, mark[1], keys, " ".join(words), line[:mark.start()].rstrip()


# ------------------------------------------------------------ the tests
@pytest.mark.parametrize("path", DOCUMENTS, ids=[p.name for p in DOCUMENTS])
def test_every_checked_table_cell_is_what_its_sources_give(path):
    wrong = []
    for n, sources, keys, column, written in checked_tables(path):
        want = expected(sources, keys, column, written)
        if written != want:
            wrong.append(f"{path.name}:{n} {keys} {column}: reads {written!r}, {' '.join(sources)} gives {want!r}")
    assert wrong == []


@pytest.mark.parametrize("path", DOCUMENTS, ids=[p.name for p in DOCUMENTS])
def test_every_marked_figure_is_what_its_file_gives(path):
    wrong = []
    for n, source, keys, column, before in marked_figures(path):
        want = expected([source], keys, column, before)
        if not before.endswith(want):
            wrong.append(f"{path.name}:{n} {keys} {column}: reads {before[-30:]!r}, {source} gives {want!r}")
    assert wrong == []


def test_the_readme_checks_its_figures_and_quotes_no_other():
    """Every decimal number of README.md's text is in a checked table, marked, or in NOT_FIGURES."""
    assert sum(1 for _ in checked_tables(README)) >= 20 and sum(1 for _ in marked_figures(README)) >= 3
    in_table = {n for n, *_ in checked_tables(README)}
    text, fenced = [], False
    for n, line in enumerate(README.read_text().splitlines(), 1):
        fenced ^= line.startswith("```")
        if fenced or line.startswith("```") or n in in_table:
            continue
        line = re.sub(r"[\d.]+(?: of \d+)?\s*" + FIGURE_MARK.pattern, "", line)
        for words in NOT_FIGURES:
            line = line.replace(words, "")
        text.append(line)
    assert re.findall(r"\d+\.\d+", "\n".join(text)) == []


def test_a_drifted_figure_is_caught():
    """The checks compare at the printed precision: one step off in the last digit fails."""
    doc = load("results/dtype_op.json")
    run = one_run([doc], {"dtype": "float32", "op": "softmax"})
    right = results_cell(run, "auto", "1.00")
    wrong = f"{float(right) + 0.01:.2f}"
    assert results_cell(run, "auto", wrong) == right != wrong
    assert results_cell(run, "auto", "1.000") != right  # three decimals are compared at three
