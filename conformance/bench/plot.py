"""The bench's two PNGs: every row's % of its own limit (bench.png) and the decode step per
implementation (bench-decode-step.png). matplotlib is imported only when a plot is written
(the optional `bench` extra); without it write() raises ImportError."""

from __future__ import annotations

from gpt2_conformance.bench import workloads as wl
from gpt2_conformance.bench.verdict import backend_order, decode_steps, model_errors

# one hue per backend, one shade per mode: the reference backends in the registry's order get
# the first hues, every other backend the next free one of the rest
REFERENCE_CMAPS = ("Greys", "Oranges", "Blues", "Greens")
OTHER_CMAPS = ("Purples", "Reds", "YlOrBr", "BuGn", "RdPu", "PuBu", "Greys")


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _colors(plt, series: list[tuple[str, str]]) -> dict:
    """{(backend, mode): colour} for the series in their order."""
    from gpt2_conformance import registry

    cmaps = {b: getattr(plt.cm, c) for b, c in zip(registry.references(), REFERENCE_CMAPS)}
    others = [getattr(plt.cm, c) for c in OTHER_CMAPS]
    colors = {}
    for i, b in enumerate(dict.fromkeys(s[0] for s in series)):
        modes = [s for s in series if s[0] == b]
        cmap = cmaps.get(b, others[i % len(others)])
        for k, s in enumerate(modes):
            colors[s] = cmap(0.85 - 0.5 * k / max(len(modes), 2))
    return colors


class LimitPlot:
    """bench.png: every timed row's % of its own limit, one panel per workload kind, with the
    2/3 and 90% lines; rows flagged as model errors are left out (the title counts them)."""

    filename = "bench.png"

    def write(self, rows: list[dict], path: str) -> str | None:
        """The path written, or None (and no file) when no row has a percentage."""
        plt = _pyplot()
        timed = [r for r in rows if r.get("workload") is not None and "pct_limit" in r]
        kinds = [k for k in wl.KINDS if any(r["workload"].kind == k for r in timed)]
        if not kinds:
            return None
        series = sorted({(r["backend"], r["mode"]) for r in timed},
                        key=lambda s: (backend_order().index(s[0]) if s[0] in backend_order() else 99, s))
        colors = _colors(plt, series)
        fig, axes = plt.subplots(len(kinds), 1, figsize=(max(10, 1.2 * len(timed) / len(kinds)), 4.2 * len(kinds)),
                                 squeeze=False)
        flagged = len(model_errors(rows))
        for ax, kind in zip(axes[:, 0], kinds):
            groups = list(dict.fromkeys(r["group"] for r in timed if r["workload"].kind == kind))
            present = [s for s in series
                       if any(r["workload"].kind == kind and (r["backend"], r["mode"]) == s for r in timed)]
            width = 0.8 / max(len(present), 1)
            for j, s in enumerate(present):
                xs, ys = [], []
                for i, g in enumerate(groups):
                    for r in timed:
                        if r["group"] == g and (r["backend"], r["mode"]) == s:
                            xs.append(i + (j - (len(present) - 1) / 2) * width)
                            ys.append(r["pct_limit"])
                ax.bar(xs, ys, width, label=f"{s[0]} {s[1]}", color=colors[s])
            ax.axhline(100 * wl.BAR_FRACTION, color="r", ls=":", lw=1, label="2/3 of the limit")
            ax.axhline(100 * wl.BEST_FRACTION, color="k", ls="--", lw=1, label=f"{100 * wl.BEST_FRACTION:.0f}%")
            ax.set_ylim(0, 100)
            ax.set_xticks(range(len(groups)))
            ax.set_xticklabels([g.split(" ", 1)[1] + "\n" + g.split(" ", 1)[0] for g in groups], fontsize=8)
            ax.set_ylabel("% of the row's limit")
            ax.set_title(f"{kind}: least bytes moved / time, as % of the same bytes streamed in the same cache state"
                         + (f" ({flagged} rows above 100% omitted: model errors)" if flagged else ""), fontsize=9)
            ax.legend(fontsize=7, ncol=3)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return path


class DecodeStepPlot:
    """bench-decode-step.png: the decode-step table as horizontal bars (ms per generated token,
    log scale)."""

    filename = "bench-decode-step.png"

    def write(self, rows: list[dict], path: str) -> str | None:
        """The path written, or None (and no file) when no step was timed."""
        steps = decode_steps(rows)
        if not steps:
            return None
        plt = _pyplot()
        fig, ax = plt.subplots(figsize=(10, 0.45 * len(steps) + 1.6))
        labels = [f"{s['backend']} {s['mode']}" for s in steps]
        ys = range(len(steps))
        ax.barh(ys, [s["median_ms"] for s in steps], color="tab:blue", label="step (one call)")
        for y, s in zip(ys, steps):
            ax.text(s["median_ms"], y, f" {s['median_ms']:.2f} ms", va="center", fontsize=8)
        ax.set_yticks(list(ys))
        ax.set_yticklabels(labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_xlabel("ms per generated token (embedding + tied head, B=1, T=1), log scale; lower is better")
        ax.set_title(f"decode step at {steps[0]['shape']}", fontsize=10)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return path
