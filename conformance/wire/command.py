"""`gpt2-conformance wire`: the wire protocol's own tools.

    gpt2-conformance wire build c|rust|js [--out-dir DIR]   # a reference client, ready for run --exec
    gpt2-conformance wire schema                           # the protocol's JSON Schema
    gpt2-conformance wire serve ADAPTER [--no-shm]          # a Python adapter over the protocol

`build` copies the client's source into the folder (an existing copy is kept: it may be the
user's own work by now) and builds it there with the language's own tool; it prints the command
that builds it again and the one that judges it."""

from __future__ import annotations

import os
import shlex
import sys

from gpt2_conformance.wire import build, schema, serve


def add_parser(sub) -> None:
    wire = sub.add_parser(
        "wire", help="the wire protocol: build a reference client, print the schema, serve an adapter"
    )
    actions = wire.add_subparsers(dest="wire_command", required=True)
    make = actions.add_parser("build", help="copy a reference client into a folder and build it there")
    make.add_argument("language", choices=sorted(build.SOURCES))
    make.add_argument("--out-dir", default=".", help="the folder for the source and the program (default: here)")
    actions.add_parser("schema", help="print the protocol's JSON Schema (protocol-1.schema.json)")
    serving = actions.add_parser("serve", help="serve a Python adapter over the protocol on stdin/stdout")
    serve.add_arguments(serving)


def run(args) -> int:
    if args.wire_command == "schema":
        with open(schema.SCHEMA_FILE, encoding="utf-8") as f:
            sys.stdout.write(f.read())
        return 0
    if args.wire_command == "serve":
        return serve.serve(args)
    return _build(args.language, args.out_dir)


def _build(language: str, folder: str) -> int:
    copy = os.path.join(folder, build.SOURCES[language])
    kept = os.path.exists(copy)
    program = os.path.join(folder, build.PROGRAMS[language])
    try:
        if not kept:
            os.makedirs(folder, exist_ok=True)
            with open(build.source(language), encoding="utf-8") as f:
                text = f.read()
            with open(copy, "w", encoding="utf-8") as f:
                f.write(text)
        if build.missing_tool(language):
            raise build.BuildError(build.missing_tool(language) or "")
        build.compile_in(language, copy, program)
    except (OSError, build.BuildError) as exc:
        print(f"gpt2-conformance wire build: error: {exc}", file=sys.stderr)
        return 1
    print(f"{'kept' if kept else 'copied'} {copy}" + (" (your copy: not overwritten)" if kept else ""))
    again = build.build_command(language, copy, program)
    if again:
        print(f"built {program}: {shlex.join(again)}")
    run_line = shlex.join(build.run_command(language, os.path.abspath(program)))
    print(f"judge it: gpt2-conformance run --exec {shlex.quote(run_line)}")
    return 0
