"""Judge a GPT-2 written in any language: the suite starts the implementation's program and speaks
the wire protocol with it over its stdin and stdout (protocol-1.schema.json, docs/any-language.md).

    process.py   ProcessAdapter: each adapter method one request and one response; a command's
                 adapter class (claims from its hello) named by an adapter spec
    protocol.py  array descriptors, typed scalars, the shared-memory folder for large arrays
    schema.py    the protocol's JSON Schema and the validator every response is checked with
    route.py     `run --exec`, `--gpt2c-exec` and `bench --exec`: a command to an adapter spec
    serve.py     a Python adapter served over the protocol (the numpy reference through the wire)
    clients/     reference clients in C, Rust and JavaScript, standard library only
    build.py     building a client (`gpt2-conformance wire build c|rust|js`)
"""
