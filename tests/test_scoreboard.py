"""scoreboard.html: self-contained (no URL but the waiver source links), every clause row and
every column with the statuses the merged JSON says, escaped text; and in a real browser
(Debian's chromium, headless): the DOM after the page's own script ran, a view selected by the
URL fragment, a screenshot, and no script error. Without chromium those tests skip, saying so."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from html.parser import HTMLParser

import pytest

from gpt2_conformance import cli, spec
from gpt2_conformance import results as res
from gpt2_conformance.merge import scoreboard
from helpers.reports import WAIVER_LINK, bench_json, suite_result, write

CHROMIUM = shutil.which("chromium")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium); the browser tests need it"
)


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """A merge of three columns (every status among them) and a bench file, through the CLI."""
    tmp = tmp_path_factory.mktemp("scoreboard")
    statuses = {
        "INIT-WPE": res.WAIVED,
        "BOUNDS-TOKEN": res.FAIL,
        "DTYPE-BFLOAT16": res.NOT_CLAIMED,
        "GOLDEN-H": res.ERROR,
        "SHAPE-EMPTY": res.SKIPPED,
    }
    inputs = [
        write(tmp, "numpy.json", suite_result(environment={"host": "box", "device_name": "AMD EPYC"})),
        write(
            tmp,
            "hf.json",
            suite_result(
                "hf-transformers",
                "gpu",
                statuses,
                {
                    "device_name": "NVIDIA H200",
                    "implementation": "transformers 5.24.0",
                    "versions": {"transformers": "5.24.0"},
                },
            ),
        ),
        write(tmp, "torch.json", suite_result("torch", statuses={"TIED-GRAD": res.FAIL})),
        write(tmp, "bench.json", bench_json()),
    ]
    code = cli.main(["merge", *inputs, "--out-dir", str(tmp / "out")])
    assert code == 1  # two columns failed a clause
    doc = json.loads((tmp / "out" / "merged.json").read_text())
    return tmp / "out" / "scoreboard.html", doc


class Cells(HTMLParser):
    """{clause: {column: data-status}} and the column headers of the matrix table."""

    def __init__(self):
        super().__init__()
        self.columns, self.cells, self.hidden, self.row, self.col = [], {}, set(), None, 0
        self.order = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "th" and "data-column" in a:
            self.columns.append(a["data-column"])
        if tag == "tr" and "data-clause" in a:
            self.row, self.col = a["data-clause"], 0
            self.cells[self.row] = {}
            self.order.append(self.row)
            if "hidden" in a:
                self.hidden.add(self.row)
        elif tag == "td" and self.row and "data-status" in a:
            self.cells[self.row][self.columns[self.col]] = a["data-status"]
            self.col += 1

    def handle_endtag(self, tag):
        if tag == "tr":
            self.row = None


def parse(text: str) -> Cells:
    cells = Cells()
    cells.feed(text)
    return cells


def expected(doc) -> dict:
    return {r["id"]: {c: v["status"] for c, v in r["cells"].items()} for r in doc["clauses"]}


# -- the file itself ----------------------------------------------------------------------
def test_every_clause_row_and_column_with_its_status(page):
    path, doc = page
    cells = parse(path.read_text())
    assert cells.columns == ["numpy cpu", "torch cpu", "hf-transformers gpu"]  # the registry order
    assert cells.order == [c.id for c in spec.CLAUSES]
    assert cells.cells == expected(doc)
    assert cells.cells["BOUNDS-TOKEN"]["hf-transformers gpu"] == res.FAIL


def test_no_url_but_the_waiver_source_links(page):
    text = page[0].read_text()
    for bad in ("<link", " src=", "@import", "url(", "//fonts", "xmlns"):
        assert bad not in text, f"scoreboard.html contains {bad!r}: it must request nothing from another host"
    hrefs = re.findall(r'<a href="([^"]*)">source</a>', text)
    assert hrefs == [WAIVER_LINK], f"waiver links {hrefs}, but should be [{WAIVER_LINK}]"
    assert text.count("http") == 1, f"{text.count('http')} 'http' in the page, but should be 1 (the waiver link)"


def test_non_pass_cells_carry_their_message_and_the_waiver_its_reason(page):
    text = page[0].read_text()
    assert "<summary>FAIL</summary><p>BOUNDS-TOKEN went wrong</p>" in text
    assert f'<b>Waived:</b> init std 0.02 <a href="{WAIVER_LINK}">source</a>' in text
    assert "Spec <b>" + spec.SPEC_VERSION + "</b> · golden data: shipped fixtures" in text


def test_waived_cells_link_to_their_upstream_drafts(tmp_path):
    """merge --upstream-dir: a waived cell links (relative to the page) to each draft whose status.json
    names its backend and clause; other cells and backends get no draft link, and without the option
    the page has none."""
    up = tmp_path / "reports" / "upstream" / "hf-transformers"
    up.mkdir(parents=True)
    (up / "status.json").write_text(
        json.dumps(
            {
                "backend": "hf-transformers",
                "drafts": [
                    {"cause": "wpe-init-std", "title": "wpe std 0.02 <not 0.01>", "clauses": ["INIT-WPE"]},
                    {"cause": "empty-sequence", "title": "empty", "clauses": ["SHAPE-EMPTY"]},
                ],
            }
        )
    )
    statuses = {"INIT-WPE": res.WAIVED, "SHAPE-EMPTY": res.FAIL}
    inputs = [
        write(tmp_path, "hf.json", suite_result("hf-transformers", statuses=statuses)),
        write(tmp_path, "numpy.json", suite_result(statuses={"INIT-WPE": res.WAIVED})),
    ]
    out = tmp_path / "reports" / "site"
    cli.main(["merge", *inputs, "--out-dir", str(out), "--upstream-dir", str(tmp_path / "reports" / "upstream")])
    text = (out / "scoreboard.html").read_text()
    link = (
        '<b>Upstream draft:</b> <a href="../upstream/hf-transformers/wpe-init-std.md">wpe std 0.02 &lt;not 0.01&gt;</a>'
    )
    assert text.count(link) == 1, text  # the hf column's INIT-WPE only: numpy has no drafts, SHAPE-EMPTY is not waived
    assert text.count("Upstream draft:") == 1 and "empty-sequence.md" not in text
    cli.main(["merge", *inputs, "--out-dir", str(tmp_path / "plain")])
    assert "Upstream draft" not in (tmp_path / "plain" / "scoreboard.html").read_text()


def test_charts_are_inline_svg_with_captions(page):
    text = page[0].read_text()
    assert text.count("<svg ") == 2 and text.count("<figcaption>") == 2  # decode B=1 and prefill GB/s
    assert "<h3>Decode step: forward_decode B1-T1-d768-past512</h3>" in text  # no step rows: its part, named
    assert text.count('stroke-dasharray="4 2"') == 1, "the prefill bar's limit must be drawn"


def test_decode_step_rows_make_one_chart_per_step_shape():
    row = {"backend": "numpy", "device": "cpu", "host": "h", "mode": "suite", "median_s": 0.002, "model_error": None}
    bench = [
        dict(row, kind="step", batch=1, group="step_decode B1-T1-d768-past512"),
        dict(row, kind="forward", batch=1, group="forward_decode B1-T1-d768-past512"),
        dict(
            row,
            backend="jax",
            kind="step",
            batch=1,
            group="step_decode B1-T1-d768-past512",
            median_s=0.001,
            model_error="untied head",
        ),
    ]
    charts = "".join(scoreboard._decode_charts(bench, hosts=1))
    assert charts.count("<svg ") == 1 and "step_decode B1-T1-d768-past512" in charts
    assert charts.index(">jax cpu<") < charts.index(">numpy cpu<"), "fastest first"
    assert "1 ms (suite) MODEL ERROR" in charts and "2 ms (suite)<" in charts


def test_text_is_escaped(tmp_path, capsys):
    evil = suite_result(statuses={"SHAPE-H": res.FAIL}).to_dict()
    evil["clauses"][2]["message"] = "<script>alert(1)</script> & more"
    evil["environment"]["host"] = "<b>host</b>"
    assert cli.main(["merge", write(tmp_path, "e.json", evil), "--out-dir", str(tmp_path)]) == 1
    text = (tmp_path / "scoreboard.html").read_text()
    assert "<script>alert(1)" not in text and "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in text
    assert "<b>host</b>" not in text


def test_ticks_are_round_numbers():
    assert scoreboard._ticks(0.13) == [0.0, 0.05, 0.1]
    assert scoreboard._ticks(27.9) == [0, 10, 20]
    assert scoreboard._ticks(18.7 * 1.08) == [0, 5, 10, 15, 20]


# -- in a real browser --------------------------------------------------------------------
def chromium(*args, url: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0", *args, url],
        capture_output=True,
        text=True,
        timeout=120,
    )


@needs_chromium
def test_browser_dom_has_every_row_and_column_with_its_status(page):
    path, doc = page
    run = chromium("--dump-dom", url=path.as_uri())
    assert run.returncode == 0, run.stderr[-2000:]
    assert "Uncaught" not in run.stderr, f"the page's script failed: {run.stderr[-1000:]}"
    cells = parse(run.stdout)
    assert cells.columns == [c["label"] for c in doc["columns"]]
    assert cells.cells == expected(doc) and cells.hidden == set()


@needs_chromium
def test_browser_view_from_the_fragment_filters_and_sorts(page):
    path, _ = page
    run = chromium("--dump-dom", url=path.as_uri() + "#group=BOUNDS&sort=3")
    assert "Uncaught" not in run.stderr, f"the page's script failed: {run.stderr[-1000:]}"
    cells = parse(run.stdout)
    bounds = [c.id for c in spec.CLAUSES if c.group == "BOUNDS"]
    assert cells.hidden == {c.id for c in spec.CLAUSES} - set(bounds)
    shown = [r for r in cells.order if r not in cells.hidden]
    assert shown[0] == "BOUNDS-TOKEN", f"rows {shown}, but the FAIL of column 3 (hf-transformers gpu) should come first"
    assert sorted(shown) == sorted(bounds)


@needs_chromium
def test_browser_screenshot_renders(page, tmp_path):
    path, _ = page
    shot = tmp_path / "shot.png"
    start = time.perf_counter()
    run = chromium(f"--screenshot={shot}", "--window-size=1200,2000", url=path.as_uri())
    seconds = time.perf_counter() - start
    assert run.returncode == 0 and shot.exists(), run.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    assert "Uncaught" not in run.stderr, run.stderr[-1000:]
    print(f"headless screenshot in {seconds:.1f} s, page {path.stat().st_size} bytes")


@needs_chromium
def test_browser_narrow_window_renders(page, tmp_path):
    path, _ = page
    shot = tmp_path / "narrow.png"
    run = chromium(f"--screenshot={shot}", "--window-size=400,900", url=path.as_uri())
    assert run.returncode == 0 and shot.exists() and shot.stat().st_size > 5_000, run.stderr[-2000:]


@needs_chromium
def test_browser_prints(page, tmp_path):
    path, _ = page
    pdf = tmp_path / "scoreboard.pdf"
    run = chromium(f"--print-to-pdf={pdf}", "--no-pdf-header-footer", url=path.as_uri())
    assert run.returncode == 0 and pdf.exists(), run.stderr[-2000:]
    assert pdf.read_bytes()[:5] == b"%PDF-" and pdf.stat().st_size > 20_000
    assert "Uncaught" not in run.stderr, run.stderr[-1000:]
