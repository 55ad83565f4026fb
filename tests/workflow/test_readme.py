"""The README and docs/ match the code: the command line page names every `esopt` verb that
exists (and only those, with options the verb has), the configuration page and the
README name every scale in config/scales, and every link of the README and docs/ leads
to a file that exists."""

import functools
import re
import subprocess
import sys

from tests.workflow.conftest import REPO

README = (REPO / "README.md").read_text()
LIBRARY = (REPO / "docs/library.md").read_text()
CONFIGURATION = (REPO / "docs/configuration.md").read_text()
BLOCKS = re.findall(r"```bash\n(.*?)```", LIBRARY, re.S)
SCALE_BLOCKS = re.findall(r"```bash\n(.*?)```", CONFIGURATION, re.S)


@functools.cache
def esopt_help(*path: str) -> str:
    out = subprocess.run([sys.executable, "-m", "esopt.cli", *path, "--help"],
                         capture_output=True, text=True, timeout=60, check=True)
    return out.stdout


def subcommands(*path: str) -> list[str]:
    """The verbs `esopt PATH --help` lists as its positional {a,b,...}, or [] for a leaf."""
    found = re.search(r"^positional arguments:\n  \{([a-z0-9,-]+)\}", esopt_help(*path), re.M)
    return found.group(1).split(",") if found else []


def verb_tree(*path: str) -> list[tuple[str, ...]]:
    subs = subcommands(*path)
    return [p for s in subs for p in verb_tree(*path, s)] if subs else [path]


def readme_commands() -> list[list[str]]:
    lines = [line.split(" # ")[0].split() for block in BLOCKS for line in block.splitlines()]
    return [tokens[1:] for tokens in lines if tokens[:1] == ["esopt"]]


def readme_verbs(tokens: list[str]) -> list[tuple[tuple[str, ...], list[str]]]:
    """(verb path, remaining tokens) for each verb a README line names ({a,b} expands)."""
    paths = [()]
    rest = list(tokens)
    while rest and any(subcommands(*p) for p in paths):
        head = rest.pop(0)
        names = head.strip("{}").split(",")
        for p in paths:
            unknown = set(names) - set(subcommands(*p))
            assert not unknown, f"docs/library.md: `esopt {' '.join(p)} {head}`: no verb {unknown}"
        paths = [(*p, n) for p in paths for n in names]
    return [(p, rest) for p in paths]


def test_every_readme_command_exists_with_its_options():
    commands = readme_commands()
    assert commands, "no esopt command in docs/library.md's bash blocks"
    for tokens in commands:
        for path, rest in readme_verbs(tokens):
            assert not subcommands(*path), \
                f"docs/library.md: `esopt {' '.join(path)}` is not a verb"
            options = set(re.findall(r"--[a-z][a-z0-9-]*", esopt_help(*path)))
            for opt in re.findall(r"--[a-z][a-z0-9-]*", " ".join(rest)):
                assert opt in options, f"docs/library.md: `esopt {' '.join(path)}` has no {opt}"


def test_the_readme_names_every_verb_of_esopt_help():
    named = {path for tokens in readme_commands() for path, _ in readme_verbs(tokens)}
    missing = set(verb_tree()) - named
    assert not missing, f"docs/library.md lacks: {sorted(' '.join(p) for p in missing)}"
    assert ("status",) in named and ("sudoku", "puzzles") in named


def test_the_docs_and_the_readme_name_every_scale():
    scales = sorted(p.stem for p in (REPO / "config/scales").glob("*.yaml"))
    in_commands = sorted(set(re.findall(r"scale=([a-z0-9-]+)", "\n".join(SCALE_BLOCKS))))
    assert in_commands == scales
    listed = re.search(r"config/scales/\{([a-z0-9,-]+)\}\.yaml", CONFIGURATION)
    assert listed and sorted(listed.group(1).split(",")) == scales
    table = re.search(r"^\| scale \|.*?\n\n", README, re.S | re.M).group(0)
    in_table = set(re.findall(r"`([a-z0-9-]+)`", table))
    assert set(scales) <= in_table, f"README's scale table lacks {set(scales) - in_table}"


def test_every_link_of_the_readme_and_the_docs_exists():
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" in target:
                continue
            assert (page.parent / target).exists(), f"{page.name}: broken link {target}"
