"""mkdocs hooks: the repository's README.md is the site's home page.

The README is written for the repository's front page, so its links into the guide start with
docs/, and the guide's pages link back to it as ../README.md. On the site the README becomes
index.md beside those pages: both kinds of link are rewritten to match. Any other relative link
the README makes (to a file outside docs/) stays as written and fails `mkdocs build --strict`.
"""

import re
from pathlib import Path

from mkdocs.structure.files import File

_INTO_DOCS = re.compile(r"(\]\(|\]: )docs/")
_TO_README = re.compile(r"(\]\(|\]: )\.\./README\.md")


def on_files(files, config):
    readme = Path(config.config_file_path).parent / "README.md"
    home = _INTO_DOCS.sub(r"\1", readme.read_text(encoding="utf-8"))
    files.append(File.generated(config, "index.md", content=home))
    return files


def on_page_markdown(markdown, page, config, files):
    return _TO_README.sub(r"\1index.md", markdown)
