"""Digests: crc32c (numpy, parallel chunks) against the standard check value and the byte-wise
definition, TF's mask, and the real wpe's two independent digests."""

import zlib

import numpy as np
import pytest

from gpt2_conformance.golden import data, digests


def test_crc32c_check_value():
    assert digests.crc32c(b"123456789") == 0xE3069283  # the CRC-32C catalogue check value
    assert digests.crc32c(b"") == 0


@pytest.mark.parametrize("n", [1, 3, 65535, 65536, 65537, 100003, 1 << 20, 3 * (1 << 20) + 5])
def test_parallel_crc32c_equals_bytewise_definition(n):
    buf = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8).tobytes()
    assert digests.crc32c(buf) == digests._raw_scalar(buf, 0xFFFFFFFF) ^ 0xFFFFFFFF


def test_bytewise_crc_is_the_castagnoli_polynomial():
    """The same byte-wise code with zlib's polynomial gives zlib.crc32: the loop is the standard
    reflected CRC, so only the polynomial (0x82F63B78, Castagnoli) distinguishes crc32c."""

    def crc(buf, poly):
        c = 0xFFFFFFFF
        for byte in buf:
            c ^= byte
            for _ in range(8):
                c = (c >> 1) ^ (poly if c & 1 else 0)
        return c ^ 0xFFFFFFFF

    buf = b"GPT-2 wte and wpe"
    assert crc(buf, 0xEDB88320) == zlib.crc32(buf)
    assert crc(buf, 0x82F63B78) == digests.crc32c(buf)


def test_mask_round_trips_and_matches_the_reference_pair():
    # values.json: model/wpe masked 718256369, unmasked 1728889894
    assert digests.mask(1728889894) == 718256369 and digests.unmask(718256369) == 1728889894
    for x in (0, 1, 0xFFFFFFFF, 0x12345678):
        assert digests.unmask(digests.mask(x)) == x


def test_real_wpe_digests():
    """sha256 29c6... (WebGPT LFS, HF lineage) and masked crc32c 718256369 (OpenAI TF index)."""
    wpe = data.load().wpe
    assert digests.sha256(wpe) == "29c69587e2af826b7c159c38620a32e549a925e6d9a0dc37cb563f377f5be772"
    assert digests.tf_masked_crc32c(wpe) == 718256369
    assert digests.sha256(wpe.astype(">f4")) == digests.sha256(wpe)  # digests are of the LE bytes


def test_compare_names_one_ulp():
    wpe = data.load().wpe
    off = wpe.copy()
    off[1023, 767] = np.nextafter(off[1023, 767], np.float32(-np.inf))
    diff = digests.compare(off, wpe)
    assert (diff.n_differ, diff.first_index) == (1, (1023, 767))
    text = diff.describe("wpe")
    assert "1 of 786432" in text and "wpe[1023, 767]" in text and "1 ulp apart" in text
    assert digests.tf_masked_crc32c(off) != 718256369
    assert digests.compare(wpe, wpe).identical


def test_digests_refuse_other_dtypes():
    with pytest.raises(ValueError, match="float32"):
        digests.sha256(np.zeros(3, np.float16))
