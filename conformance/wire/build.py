"""Building the reference clients (wire/clients/), each with its language's own tool and nothing else:

    c      cc -std=c11 -O2 -o gpt2_wire gpt2_wire.c -lm
    rust   rustc --edition 2021 -O -o gpt2_wire_rs gpt2_wire.rs
    js     nothing to build: node gpt2_wire.js

`gpt2-conformance wire build LANG` runs these on a copy of the source in a folder of the user's
(the copy is where their own implementation starts); the tests build them into temporary folders,
and the C mutants (tests/helpers/wire_mutants.py) are the same source, patched, some built with
AddressSanitizer."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess

CLIENTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "clients")
SOURCES = {"c": "gpt2_wire.c", "rust": "gpt2_wire.rs", "js": "gpt2_wire.js"}
PROGRAMS = {"c": "gpt2_wire", "rust": "gpt2_wire_rs", "js": "gpt2_wire.js"}
TOOLS = {"c": "cc", "rust": "rustc", "js": "node"}


class BuildError(RuntimeError):
    """A client that did not build: the command and the compiler's first error, in one line."""


def source(language: str) -> str:
    """The shipped source of a client."""
    if language not in SOURCES:
        raise ValueError(f"no client in {language!r}; the clients: {', '.join(SOURCES)}")
    return os.path.join(CLIENTS_DIR, SOURCES[language])


def missing_tool(language: str) -> str | None:
    """Why this machine cannot build or run the client (its tool is not on PATH), else None."""
    tool = TOOLS[language]
    return None if shutil.which(tool) else f"{tool} is not on PATH: the {language} client needs it"


def build_command(language: str, src: str, program: str, sanitize: bool = False) -> list[str]:
    """The command that builds `src` into `program` ([] for JavaScript)."""
    if language == "c":
        flags = ["-g", "-O2", "-fsanitize=address", "-fno-omit-frame-pointer"] if sanitize else ["-O2"]
        return ["cc", "-std=c11", *flags, "-o", program, src, "-lm"]
    if language == "rust":
        return ["rustc", "--edition", "2021", "-O", "-o", program, src]
    return []


def run_command(language: str, program: str) -> list[str]:
    """The argv that starts a built client (what --exec gets)."""
    return ["node", program] if language == "js" else [program]


def build(
    language: str, folder: str, text: str | None = None, sanitize: bool = False, timeout: float = 300
) -> list[str]:
    """The client built in `folder` from its shipped source (or from `text`, a patched copy):
    the argv that runs it. BuildError where the compiler refuses it."""
    src = source(language)
    missing = missing_tool(language)
    if missing:
        raise BuildError(missing)
    os.makedirs(folder, exist_ok=True)
    copy = os.path.join(folder, SOURCES[language])
    if text is None:
        shutil.copyfile(src, copy)
    else:
        with open(copy, "w", encoding="utf-8") as f:
            f.write(text)
    program = os.path.join(folder, PROGRAMS[language])
    compile_in(language, copy, program, sanitize, timeout)
    return run_command(language, program)


def compile_in(language: str, src: str, program: str, sanitize: bool = False, timeout: float = 300) -> None:
    command = build_command(language, src, program, sanitize)
    if not command:
        return
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BuildError(f"{shlex.join(command)}: {exc}") from None
    if out.returncode != 0:
        lines = [
            ln for ln in (out.stderr + out.stdout).splitlines() if "error" in ln.lower()
        ] or out.stderr.splitlines()
        raise BuildError(f"{shlex.join(command)} exited with {out.returncode}: {(lines or [''])[0].strip()}")
