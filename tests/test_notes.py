"""The tuning notes are where the code's numbers are explained: every link into them must land."""

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTES = ROOT / "notes" / "TUNING.md"
CITING = ("softmax_lab", "kernels", "tests", "benchmarks", "docs", "README.md", "results/README.md")


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation but - and _ dropped, spaces as -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors() -> set[str]:
    return {slug(m[1]) for m in re.finditer(r"^#+ (.+)$", NOTES.read_text(), re.MULTILINE)}


def citing_files():
    for name in CITING:
        path = ROOT / name
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.suffix in
                                                      (".py", ".cu", ".cuh", ".md", ".sh", ".json"))
        yield from (p for p in files if "__pycache__" not in p.parts)


def test_slug_follows_github():
    assert slug("Auto: order between families") == "auto-order-between-families"
    assert slug("single_read clusters") == "single_read-clusters"
    assert slug("The float32 backward against quack") == "the-float32-backward-against-quack"


def test_every_link_into_the_notes_names_one_of_their_sections():
    known = anchors()
    cited = [(p.relative_to(ROOT), m[1]) for p in citing_files()
             for m in re.finditer(r"TUNING\.md#([\w-]+)", p.read_text(errors="replace"))]
    cited += [("notes/TUNING.md", m[1]) for m in re.finditer(r"\]\(#([\w-]+)\)", NOTES.read_text())]
    assert len(cited) > 20
    assert [(str(where), a) for where, a in cited if a not in known] == []


def test_every_auto_rule_cites_its_section_of_the_notes():
    auto = importlib.import_module("softmax_lab.variants.auto")
    known = anchors()
    for rule in auto.RULES:
        assert rule.evidence.startswith("notes/TUNING.md#"), rule.reason
        assert rule.evidence.removeprefix("notes/TUNING.md#") in known, rule.evidence
