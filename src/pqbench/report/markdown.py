"""summary.md: the report's text and tables in Markdown, figures linked from figures/*.png."""

from __future__ import annotations

from pqbench.report.tables import Table


def _cell(v) -> str:
    return str(v).replace("|", "\\|").replace("\n", " ")


def table(t: Table, heading: bool = True) -> str:
    lines = [f"## {t.title}", ""] if heading else []
    if t.note:
        lines += [t.note, ""]
    if not t.rows:
        return "\n".join(lines + ["none", ""])
    headers = t.headers if any(t.headers) else [""] * len(t.rows[0])
    lines.append("| " + " | ".join(_cell(h) for h in headers) + " |")
    lines.append("|" + "|".join("---" for _ in headers) + "|")
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in t.rows]
    return "\n".join(lines + [""])


def page(title: str, summary: Table, warnings: list, figures: list, absent: list, tables: list) -> str:
    """figures: (id, title, relative png path, caption)."""
    out = [f"# {title}", "", table(summary, heading=False), "## Warnings", ""]
    if warnings:
        for head, details in warnings:
            out.append(f"- {head}")
            out += [f"  - {d}" for d in details[:20]]
            if len(details) > 20:
                out.append(f"  - … {len(details) - 20} more in report.html")
    else:
        out.append("none: no outliers, tails or wide intervals that call for a rerun")
    out += ["", "## Figures", ""]
    for _, ftitle, path, caption in figures:
        out += [f"### {ftitle}", "", f"![{ftitle}]({path})", "", caption, ""]
    if absent:
        out += [f"Not shown: {', '.join(absent)}.", ""]
    out += [table(t) for t in tables]
    return "\n".join(out).rstrip() + "\n"
