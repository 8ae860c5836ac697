"""The documentation site as a project: ``mkdocs.yml``, the assets, and the generated pages (the home page
and the tutorial with real command output, in English, Japanese and Chinese as the GPT-2 walkthrough, one page per bundled spec, the models index, GPT-3's table,
the attention pages, the conventions, the spec language, the CLI and API references).
``archcalc docs -o DIR`` writes them all under DIR; ``mkdocs build -f DIR/mkdocs.yml`` renders.

Pages are deterministic (same specs → same bytes), except command output that varies by machine (timings,
losses, the install path), which sits between ``<!-- varies -->`` markers: comparisons ignore the digits and
absolute paths there, so a page is only rewritten when something else changed.

>>> same_text("a <!-- varies -->1.5 s in /x/spec<!-- /varies -->", "a <!-- varies -->2.25 s in /y/z/spec<!-- /varies -->")
True
>>> same_text("<!-- varies -->489 tokens/s<!-- /varies -->", "<!-- varies -->1,204 tokens/s<!-- /varies -->")
True
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from pathlib import Path

from archcalc.site import pages
from archcalc.site.examples import Program
from archcalc.site.i18n import LANGUAGES, in_language, page_path
from archcalc.site.project import HAND_WRITTEN, MARKER, asset_texts, guides_dir, mkdocs_yml, navigation

TEMPLATES = Path(__file__).parent
VARIES = re.compile(r"<!-- varies -->.*?<!-- /varies -->", re.S)
# numbers (one token with their separators: 489 and 1,204 tokens/s are the same line), and absolute paths
MACHINE = re.compile(r"\d(?:[\d,.]*\d)?|(?<![\w.])/[^\s()'\"]+")


def render_all(root: Path, program: Program) -> dict[Path, str]:
    """Every file of the site project under ``root``: ``mkdocs.yml``, ``docs/**``; ``program``: the command line
    that the pages document and whose examples they run (``archcalc docs`` hands it over)."""
    from archcalc.site import home, tutorial
    from archcalc.site.examples import launch, prefetch, start
    from archcalc.site.model_page import model_page
    from archcalc.site.walkthrough import walkthrough_page
    from archcalc.spec import load_spec
    from archcalc.spec.library import bundled_names

    start(program)  # the child process for the torch commands imports torch while the others run here
    prefetch(home.SCRIPT, program)
    prefetch(tutorial.STEPS, program)
    launch()  # the commands of both that need torch run in that child process while the pages render
    docs = root / "docs"
    out: dict[Path, str] = {}
    specs = [load_spec(name) for name in bundled_names()]
    groups: dict[str, str] = {}
    for spec in specs:
        out[docs / "models" / f"{spec.name}.md"] = _marked(model_page(spec, f"spec/{spec.name}.yaml", groups),
                                                           f"spec/{spec.name}.yaml")
    out[docs / "models" / "index.md"] = _marked(pages.models_index(specs))
    out |= _translated(docs, lambda lang: tutorial.tutorial_page(program, lang), "tutorial.md")
    out |= _translated(docs, walkthrough_page, "gpt2-parameters.md", "archcalc/site/walkthrough.py")
    out[docs / "gpt3.md"] = _marked(pages.gpt3_page(), "spec/gpt3.yaml")
    out[docs / "attention.md"] = _marked(pages.attention_page(), "spec/gpt3.yaml")
    out[docs / "attention-head.md"] = _marked(pages.head_page(), "spec/gpt3.yaml")
    out[docs / "conventions.md"] = _marked(pages.conventions_page(_template("conventions.md.in")), "archcalc/site/conventions.md.in")
    out[docs / "spec-language.md"] = _marked(pages.spec_language_page(_template("spec-language.md.in")), "archcalc/site/spec-language.md.in")
    out[docs / "cli.md"] = _marked(pages.cli_page(program.parser), "the argparse help of archcalc/cli")
    out[docs / "api.md"] = _marked(_template("api.md.in"), "archcalc/site/api.md.in")
    for name, text in asset_texts().items():
        out[docs / "assets" / name] = text
    out[root / "mkdocs.yml"] = mkdocs_yml(navigation([(s.name, s.title or s.name) for s in specs], groups))
    guides = _guides(docs)
    out |= guides
    # The home page shows what 'archcalc docs -o mysite' prints in an empty folder: it writes every file, this one (in each language) and
    # the guides too (which a checkout's own site has as originals)
    written = len(out) + len(LANGUAGES) + (0 if guides else len(HAND_WRITTEN))
    printed = report(Path("mysite"), [Path()] * written, 0)
    return out | _translated(docs, lambda lang: home.home_page(printed, program, lang), "index.md")


def _translated(docs: Path, page: Callable[[str], str], name: str, origin: str = "archcalc/site") -> dict[Path, str]:
    """Page ``name`` in every language (``page(lang)``): docs/NAME in English, docs/LANG/NAME in the others."""
    return {docs / page_path(name, lang): _marked(in_language(page(lang), lang, name), origin) for lang in LANGUAGES}


def report(root: Path, written: list[Path], unchanged: int) -> list[str]:
    """What ``archcalc docs`` prints: each file it rewrote in an existing site (none listed for a new one), a summary,
    and how to build the site."""
    lines = [f"wrote {path}" for path in written] if unchanged else []
    config = shlex.quote(str(root / "mkdocs.yml"))  # a command to paste: a folder with a space stays one argument
    lines.append(f"{root}: {len(written)} file(s) written, {unchanged} unchanged")
    if written:
        lines.append(f"build the site with: mkdocs build -f {config}  (or preview it: mkdocs serve -f {config})")
    return lines


def machine_independent(text: str) -> str:
    """``text`` with the digits and absolute paths between ``<!-- varies -->`` markers masked: what two runs of
    ``archcalc docs`` on different machines agree on (and what a page's content hash covers)."""
    return VARIES.sub(lambda m: MACHINE.sub("#", m.group(0)), text)


def same_text(old: str, new: str) -> bool:
    """Whether a file on disk already says what ``new`` says (what varies by machine aside)."""
    return old == new or machine_independent(old) == machine_independent(new)


def stale(files: dict[Path, str]) -> list[Path]:
    """The files that are missing or say something else than ``files``."""
    return [path for path, text in files.items()
            if not path.is_file() or not same_text(path.read_text(encoding="utf-8", errors="replace"), text)]


def _guides(docs: Path) -> dict[Path, str]:
    """The hand-written guides, copied into ``docs`` (marked as archcalc's copies); none where ``docs`` is the folder
    they are read from (a checkout writing its own site: they are the originals there)."""
    source = guides_dir()
    if docs.resolve() == source.resolve():
        return {}
    return {docs / path: _marked((source / path).read_text(encoding="utf-8"), f"docs/{path}") for _, _, path in HAND_WRITTEN}


def _marked(page: str, origin: str = "archcalc/site") -> str:
    """A page with the comment that marks it as archcalc's (so a later run may replace it, and nothing else)."""
    return f"<!-- {MARKER} from {origin}: edit that, then run 'archcalc docs' -->\n{page}"


def _template(name: str) -> str:
    return (TEMPLATES / name).read_text(encoding="utf-8")
