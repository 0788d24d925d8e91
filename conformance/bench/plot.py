"""bench.png: per workload, every row's time relative to the fastest with its 95% interval as
an error bar, so the picture ranks no more than the numbers can. matplotlib is imported only
when the plot is written (the optional `bench` extra); without it write() raises ImportError."""

from __future__ import annotations


class RatioPlot:
    filename = "bench.png"

    def write(self, tables: list[dict], meta: dict, path: str) -> str | None:
        tables = [t for t in tables if any(r.get("ratio") is not None for r in t["rows"])]
        if not tables:
            return None
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        heights = [max(1.5, 0.35 * sum(r.get("ratio") is not None for r in t["rows"]) + 1) for t in tables]
        fig, axes = plt.subplots(
            len(tables), 1, figsize=(8, sum(heights)), squeeze=False, gridspec_kw={"height_ratios": heights}
        )
        for ax, table in zip(axes[:, 0], tables, strict=True):
            rows = [r for r in table["rows"] if r.get("ratio") is not None][::-1]  # fastest on top
            y = range(len(rows))
            ratios = [r["ratio"] for r in rows]
            low = [r["ratio"] - r["ci_low"] for r in rows]
            high = [r["ci_high"] - r["ratio"] for r in rows]
            ax.errorbar(ratios, y, xerr=[low, high], fmt="o", capsize=3, color="tab:blue")
            ax.axvline(1.0, color="grey", lw=0.8, ls="--")
            ax.set_yticks(list(y), [f"{r['label']} {r['mode']} ({r['rank']})" for r in rows], fontsize=8)
            ax.set_title(table["group"], fontsize=9)
            ax.set_xlabel("time / fastest (95% interval)", fontsize=8)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return path
