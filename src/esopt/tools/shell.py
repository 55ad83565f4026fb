"""A small command shell that runs inside the sandbox child: the document agent's tool.

The sandbox refuses process creation, so there is no /bin/sh to call: this harness
interprets the agent's commands itself, in the child, under the sandbox's limits and
guard. Commands: `ocr FILE` (alias `tesseract FILE [stdout]`), `ls`, `cat`, `grep`,
`head`, `tail`, `wc`, `echo`, `pwd`; pipes `|`, and `;`, `&&` or newlines between
commands. Paths must stay inside the working directory; redirection and substitution are
not supported (an error line says so, as a shell would).

OCR is deterministic and the slowest step (~1-3 s a page on one core), so the parent may
pass earlier results in `payload["ocr_cache"]` ({sha256 of the file: text}); results
computed here come back in the return value's "ocr" for the parent to remember.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex

COMMANDS = ("ocr", "tesseract", "ls", "cat", "grep", "head", "tail", "wc", "echo", "pwd")
MAX_INPUT_BYTES = 20 << 20  # a bigger file is refused before it is read
_IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff")  # PNG, JPEG


class ShellError(Exception):
    """A failed command: its message is what the agent sees."""


class _Shell:
    def __init__(self, cache: dict[str, str]):
        self.root = os.path.realpath(os.getcwd())
        self.cache, self.computed = cache, {}

    def path(self, cmd: str, name: str) -> str:
        real = os.path.realpath(os.path.join(self.root, name))
        if real != self.root and not real.startswith(self.root + os.sep):
            raise ShellError(f"{cmd}: {name}: permission denied (outside the working directory)")
        if not os.path.exists(real):
            raise ShellError(f"{cmd}: {name}: No such file or directory")
        return real

    def read(self, cmd: str, name: str) -> bytes:
        real = self.path(cmd, name)
        if os.path.isdir(real):
            raise ShellError(f"{cmd}: {name}: Is a directory")
        if os.path.getsize(real) > MAX_INPUT_BYTES:
            raise ShellError(f"{cmd}: {name}: file too large")
        with open(real, "rb") as f:
            return f.read()

    def text_of(self, cmd: str, args: list[str], stdin: str | None) -> str:
        if not args:
            if stdin is None:
                raise ShellError(f"{cmd}: missing file operand")
            return stdin
        parts = []
        for name in args:
            data = self.read(cmd, name)
            if b"\0" in data[:4096] or data.startswith(_IMAGE_MAGIC):
                raise ShellError(f"{cmd}: {name}: binary file (an image: use `ocr {name}`)")
            parts.append(data.decode("utf-8", "replace"))
        return "".join(parts)

    def ocr(self, args: list[str]) -> str:
        files = [a for a in args if not a.startswith("-") and a not in ("stdout", "-")]
        if len(files) != 1:
            raise ShellError("usage: ocr IMAGE")
        data = self.read("ocr", files[0])
        key = hashlib.sha256(data).hexdigest()
        if key not in self.cache:
            from PIL import Image, UnidentifiedImageError

            try:
                import io

                Image.open(io.BytesIO(data)).verify()
            except (UnidentifiedImageError, OSError, SyntaxError) as e:
                raise ShellError(f"ocr: {files[0]}: not an image ({type(e).__name__})") from None
            from esopt.tools.ocr import ocr_text

            self.cache[key] = self.computed[key] = ocr_text(data)
        return self.cache[key]

    def run(self, argv: list[str], stdin: str | None) -> str:
        cmd, args = argv[0], argv[1:]
        if cmd in ("ocr", "tesseract"):
            return self.ocr(args)
        if cmd == "pwd":
            return self.root
        if cmd == "echo":
            return " ".join(args)
        if cmd == "ls":
            target = self.path("ls", args[-1]) if args and not args[-1].startswith("-") \
                else self.root
            return "\n".join(sorted(os.listdir(target))) if os.path.isdir(target) \
                else os.path.basename(target)
        if cmd == "cat":
            return self.text_of("cat", args, stdin).rstrip("\n")
        if cmd in ("head", "tail"):
            n, rest = 10, list(args)
            if rest[:1] == ["-n"] and len(rest) > 1:
                n, rest = _int(cmd, rest[1]), rest[2:]
            elif rest[:1] and re.fullmatch(r"-\d+", rest[0]):
                n, rest = int(rest[0][1:]), rest[1:]
            lines = self.text_of(cmd, rest, stdin).splitlines()
            return "\n".join(lines[:n] if cmd == "head" else lines[-n:] if n else [])
        if cmd == "wc":
            flags = {a for a in args if a.startswith("-")}
            text = self.text_of("wc", [a for a in args if not a.startswith("-")], stdin)
            counts = {"-l": len(text.splitlines()), "-w": len(text.split()), "-c": len(text)}
            picked = [str(v) for k, v in counts.items() if k in flags] or \
                [str(v) for v in counts.values()]
            return " ".join(picked)
        if cmd == "grep":
            return self.grep(args, stdin)
        raise ShellError(f"sh: {cmd}: command not found (available: {', '.join(COMMANDS)})")

    def grep(self, args: list[str], stdin: str | None) -> str:
        flags, rest = set(), list(args)
        while rest and rest[0].startswith("-") and len(rest[0]) > 1:
            flags |= set(rest.pop(0)[1:])
        if not rest:
            raise ShellError("usage: grep [-i] [-v] [-n] [-c] PATTERN [FILE...]")
        pattern, files = rest[0], rest[1:]
        try:
            rx = re.compile(pattern, re.IGNORECASE if "i" in flags else 0)
        except re.error as e:
            raise ShellError(f"grep: bad pattern: {e}") from None
        hits = [(i, line) for i, line in enumerate(self.text_of("grep", files, stdin)
                                                   .splitlines(), 1)
                if bool(rx.search(line)) != ("v" in flags)]
        if "c" in flags:
            return str(len(hits))
        return "\n".join(f"{i}:{line}" if "n" in flags else line for i, line in hits)


def _int(cmd: str, s: str) -> int:
    try:
        return max(0, int(s))
    except ValueError:
        raise ShellError(f"{cmd}: invalid number of lines: {s!r}") from None


_UNSUPPORTED = re.compile(r"[<>`]|\$\(|\|\||&\s*$|&[^&]")


def _split_unquoted(text: str, seps: tuple[str, ...]) -> list[str]:
    """Split at any of `seps` where it stands outside single and double quotes."""
    out, buf, quote, i = [], [], "", 0
    while i < len(text):
        c = text[i]
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        else:
            sep = next((s for s in seps if text.startswith(s, i)), None)
            if sep is not None:
                out.append("".join(buf))
                buf, i = [], i + len(sep)
                continue
        buf.append(c)
        i += 1
    out.append("".join(buf))
    return out


def _unquoted(text: str) -> str:
    """The text with its quoted parts blanked (what a shell would interpret)."""
    out, quote = [], ""
    for c in text:
        if quote:
            quote = "" if c == quote else quote
            out.append(" " if quote else c)
        elif c in "'\"":
            quote = c
            out.append(c)
        else:
            out.append(c)
    return "".join(out)


def _pipelines(script: str) -> list[str]:
    """Split a script into pipelines at newlines, `;` and `&&` (outside quotes)."""
    parts = _split_unquoted(script, ("&&", ";", "\n"))
    return [p.strip() for p in parts if p.strip() and not p.strip().startswith("#")]


def run_script(script: str, cache: dict[str, str] | None = None,
               max_chars: int = 4000) -> tuple[str, dict[str, str], int]:
    """Run a command script in the current directory; (output, new OCR results, failures)."""
    shell, chunks, failures = _Shell(dict(cache or {})), [], 0
    for line in _pipelines(script):
        try:
            if _UNSUPPORTED.search(_unquoted(line)):
                raise ShellError(f"sh: {line[:60]!r}: redirection, substitution and "
                                 "background jobs are not supported")
            text = None
            for stage in _split_unquoted(line, ("|",)):
                try:
                    argv = shlex.split(stage)
                except ValueError as e:
                    raise ShellError(f"sh: syntax error: {e}") from None
                if not argv:
                    raise ShellError("sh: syntax error near '|'")
                text = shell.run(argv, text)
            if text:
                chunks.append(text)
        except ShellError as e:
            failures += 1
            chunks.append(str(e))
        if sum(len(c) for c in chunks) > max_chars:
            break
    return "\n".join(chunks)[:max_chars], shell.computed, failures


def run_commands(namespace: dict, payload: dict) -> dict:
    """Sandbox harness: run `payload["script"]`; return its output and new OCR results."""
    output, computed, failures = run_script(payload["script"], payload.get("ocr_cache"),
                                            int(payload.get("max_chars", 4000)))
    return {"output": output, "ocr": computed, "failures": failures}

