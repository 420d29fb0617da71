"""MkDocs hooks (``hooks:`` in mkdocs.yml): the pages and assets generated at build time.

- the metric pages, one per registry family, and the metrics overview (gen_metrics); a
  family with a hand-written page (``docs/metrics/<family>.md``) gets the registry's
  part appended to it, so that each family has one page and one navigation entry;
- a page for each headline metric (NDCG, MAP, recall, ...): variants and peers (gen_headline);
- the CLI reference, the errors page and the performance page (gen_reference);
- ``docs/conventions.md`` served from ``frame_metrics.conventions.markdown()`` and
  ``docs/options.md`` from ``frame_metrics.options.markdown()`` (the committed files are
  the same text: tests/test_generated_docs.py);
- the notebooks of ``notebooks/`` as pages (mkdocs-jupyter renders their committed
  outputs), and MathJax served from the site (from the django-static-mathjax wheel);
- the architecture page's layers diagram (an inline SVG of the import-linter contract)
  and its table of the families' methods (gen_architecture);
- ``python exec`` code blocks run, with their output (gen_run); ``python recorded``
  blocks (pages on MovieLens, which the repository does not hold) shown with the output
  committed below them (gen_run.record_page writes it, a test checks it);
- the package's version in the header and the footer, and a repository link when the
  package metadata names one (``[project.urls]``), from :func:`site_identity`.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from email.message import Message
from importlib.metadata import metadata
from pathlib import Path
from typing import Any, NamedTuple, cast

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gen_architecture
import gen_headline
import gen_metrics
import gen_reference
import gen_run

ROOT = Path(__file__).resolve().parents[2]
#: The MathJax files the site serves, relative to the wheel's es5 folder: the TeX input
#: with CommonHTML output, its fonts, and what it loads on demand.
MATHJAX_PARTS = ("tex-chtml.js", "output/chtml/fonts/woff-v2", "input/tex/extensions", "ui", "a11y")
QUICKSTART = "<!-- readme:quickstart -->"


def _mathjax_dir() -> Path:
    spec = importlib.util.find_spec("mathjax")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        es5 = Path(location) / "static" / "mathjax" / "es5"
        if (es5 / "tex-chtml.js").is_file():
            return es5
    raise RuntimeError(
        "docs: MathJax not found; install the docs extra: pip install -e '.[docs]' "
        "(it brings django-static-mathjax, a wheel holding MathJax 3)"
    )


#: ``[project.urls]`` labels that name the source repository (compared in lower case).
REPOSITORY_LABELS = ("repository", "source", "source code", "code", "github")


class Identity(NamedTuple):
    """What the site says about the package: title, footer line and repository."""

    site_name: str
    copyright: str
    repo_url: str | None


def site_identity(name: str, metadata: Message) -> Identity:
    """The site's title and footer with the package's version, and its repository.

    The version and the URLs are the installed package's metadata (``pyproject.toml`` as
    installed): a repository link appears only when ``[project.urls]`` names one.
    """
    version = metadata["Version"]
    licence = metadata.get("License-Expression") or metadata.get("License")
    repo_url = None
    for entry in metadata.get_all("Project-URL") or []:
        label, _, url = entry.partition(",")
        if label.strip().lower() in REPOSITORY_LABELS and url.strip():
            repo_url = url.strip()
            break
    footer = f"{name} {version}" + (f", {licence} licence" if licence else "")
    return Identity(f"{name} {version}", footer, repo_url)


def _formatter() -> str | None:
    """The code formatter mkdocstrings formats signatures with (black, else ruff)."""
    return next((m for m in ("black", "ruff") if importlib.util.find_spec(m)), None)


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Add the headline and family pages under "Metrics", the version and the repository."""
    if _formatter() is None:
        # Without one, mkdocstrings prints every signature on one long line.
        raise RuntimeError(
            "docs: the API pages format signatures with black or ruff, and neither is "
            "installed; install the docs extra: pip install -e '.[docs]'"
        )
    # The installed metadata is an email.message.Message subclass (PackageMetadata).
    identity = site_identity(config.site_name, cast("Message", metadata("frame_metrics")))
    config.site_name = identity.site_name
    config.copyright = identity.copyright
    if identity.repo_url:
        config.repo_url = identity.repo_url
    gen_metrics.check_formulas()
    nav: list[Any] = config.nav or []
    for entry in nav:
        if isinstance(entry, dict) and "Metrics" in entry:
            section = entry["Metrics"]
            section.append({"Headline metrics": gen_headline.nav()})
            for family in gen_metrics.families():
                section.append({gen_metrics.family_title(family): gen_metrics.page_path(family)})
            break
    else:
        raise RuntimeError("docs: mkdocs.yml's nav needs a 'Metrics' section")
    return config


def _guides(config: MkDocsConfig) -> list[str]:
    """The families whose page is written by hand (``docs/metrics/<family>.md``).

    The build appends the registry's part to it (:func:`on_page_markdown`) rather than
    adding a second page: one page, and one entry in the navigation, per family.
    """
    return [
        family
        for family in gen_metrics.families()
        if (Path(config.docs_dir) / gen_metrics.page_path(family)).is_file()
    ]


@event_priority(100)  # before mkdocs-jupyter's on_files, which wraps the notebooks
def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the generated pages, the notebooks and MathJax to the site's files."""
    own_pages = gen_headline.titles()
    guides = {gen_metrics.page_path(family) for family in _guides(config)}
    family_pages = {
        path: text
        for path, text in gen_metrics.family_pages(own_pages).items()
        if path not in guides
    }
    pages = {
        "metrics/index.md": gen_metrics.index_page(own_pages),
        **gen_headline.headline_pages(),
        **family_pages,
        "cli.md": gen_reference.cli_page(),
        "errors.md": gen_reference.errors_page(),
        "performance.md": gen_reference.performance_page(),
    }
    for path, text in pages.items():
        if files.get_file_from_path(path) is not None:
            raise RuntimeError(f"docs: {path} is generated; remove docs/{path}")
        files.append(File.generated(config, path, content=text))
    # Real files under the repository root (not File.generated): mkdocs-jupyter's wrapper
    # recomputes abs_src_path from src_dir.
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        files.append(
            File(
                f"notebooks/{notebook.name}",
                src_dir=str(ROOT),
                dest_dir=config.site_dir,
                use_directory_urls=config.use_directory_urls,
            )
        )
    es5 = _mathjax_dir()
    for part in MATHJAX_PARTS:
        source = es5 / part
        for asset in [source] if source.is_file() else sorted(source.rglob("*")):
            if asset.is_file():
                rel = asset.relative_to(es5).as_posix()
                files.append(
                    File.generated(config, f"assets/mathjax/{rel}", abs_src_path=str(asset))
                )
    return files


def on_page_read_source(page: Page, config: MkDocsConfig) -> str | None:
    """The conventions and options pages are what the code generates (equal to the files)."""
    if page.file.src_uri == "conventions.md":
        from frame_metrics.conventions import markdown as conventions_page

        return conventions_page()
    if page.file.src_uri == "options.md":
        from frame_metrics.options import markdown as options_page

        return options_page()
    return None


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Fill in the generated parts of a page, then run its examples.

    README's Quickstart commands, the architecture page's diagram and table, the registry's
    part of a hand-written family page; the options page has no table of contents.
    """
    if page.file.src_uri == "options.md":
        # The page is one wide table and has no sections: the table of contents' column
        # goes to the table, so that all its columns fit.
        page.meta["hide"] = [*page.meta.get("hide", []), "toc"]
    guides = _guides(config)
    if page.file.src_uri in {gen_metrics.page_path(family) for family in guides}:
        registry = gen_metrics.family_pages(gen_headline.titles(), guides)
        markdown = markdown.rstrip("\n") + "\n\n" + registry[page.file.src_uri]
    if QUICKSTART in markdown:
        markdown = markdown.replace(QUICKSTART, gen_reference.readme_quickstart())
    markdown = gen_architecture.fill(markdown)
    markdown = gen_run.show_recorded(markdown)
    return gen_run.run_blocks(markdown, page.file.src_uri)


#: nbconvert's template loads MathJax 2 and mermaid from CDNs; the site serves MathJax 3
#: itself (its config also typesets the notebooks' Markdown cells) and has no diagrams.
_CDN_SCRIPTS = re.compile(
    r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->"
    r"|<script[^>]*\bsrc=\"https?://[^\"]*\"[^>]*>\s*</script>"
    r"|<script type=\"module\">[^<]*https?://cdn[^<]*</script>",
    re.S,
)


def on_page_content(html: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Notebook pages without nbconvert's CDN scripts."""
    if page.file.src_uri.endswith(".ipynb"):
        return _CDN_SCRIPTS.sub("", html)
    return html
