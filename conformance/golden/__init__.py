"""GOLDEN: the real GPT-2 tables.

    readers.py   read wte/wpe from real checkpoint formats (safetensors, torch .bin, TF, .npz)
    digests.py   sha256 / TF masked crc32c of float32 tables; compare a table with the real one
    data.py      the shipped golden data (fixtures/): real wpe, known real wte values, golden h
    command.py   `gpt2-conformance golden --checkpoint PATH`

numpy only: no framework is imported here (torch, TF and safetensors files are parsed or read
with the safetensors library, which is imported only when a .safetensors file is read).
"""
