"""report.html: one self-contained page (figures as base64 PNG, inline CSS, no external resources)."""

from __future__ import annotations

import base64
import html

from pqbench.report.tables import Table

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1200px;
       padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 12.5px; }
th, td { border: 1px solid #ddd; padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 1.2em 0; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { color: #555; font-size: 0.95em; }
.warn { background: #fff6e0; border-left: 4px solid #e0a000; padding: 0.4em 0.8em; margin: 0.4em 0; }
.note { color: #555; font-size: 0.95em; } pre { background: #f7f7f7; padding: 0.8em; overflow-x: auto; }
nav a { margin-right: 1em; }
"""

# Marks the figures that decoded, and logs a console error for any that did not (the report test
# opens the page in headless Chromium and checks both).
CHECK_SCRIPT = """
window.addEventListener("load", function () {
  var imgs = document.querySelectorAll("figure img"), broken = 0;
  imgs.forEach(function (img) {
    if (!img.complete || img.naturalWidth === 0) { broken++; console.error("figure did not decode: " + img.id); }
  });
  document.body.setAttribute("data-figures", String(imgs.length));
  document.body.setAttribute("data-figures-broken", String(broken));
});
"""


def esc(x) -> str:
    return html.escape(str(x), quote=True)


def _is_num(s: str) -> bool:
    return bool(s) and (s[0].isdigit() or s[0] in "+-–") and not any(ch.isalpha() for ch in s.replace("e", ""))


def table(t: Table, heading: bool = True) -> str:
    parts = [f'<section id="{esc(t.id)}">']
    if heading:
        parts.append(f"<h2>{esc(t.title)}</h2>")
    if t.note:
        parts.append(f'<p class="note">{esc(t.note)}</p>')
    if not t.rows:
        parts.append('<p class="note">none</p></section>')
        return "".join(parts)
    head = "".join(f"<th>{esc(h)}</th>" for h in t.headers) if any(t.headers) else ""
    parts.append(f"<table>{'<thead><tr>' + head + '</tr></thead>' if head else ''}<tbody>")
    for row in t.rows:
        cells = "".join(f'<td class="num">{esc(v)}</td>' if _is_num(str(v)) else f"<td>{esc(v)}</td>" for v in row)
        parts.append(f"<tr>{cells}</tr>")
    parts.append("</tbody></table></section>")
    return "".join(parts)


def figure(fid: str, title: str, png: bytes, caption: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return (f'<figure id="fig-{esc(fid)}"><img id="img-{esc(fid)}" alt="{esc(title)}" '
            f'src="data:image/png;base64,{data}"><figcaption><b>{esc(title)}.</b> {esc(caption)}</figcaption></figure>')


def page(title: str, summary: Table, warnings: list, figures: list, absent: list, tables: list,
         spec_toml: str | None) -> str:
    """figures: (id, title, png bytes, caption); absent: titles of figures the run has no data for."""
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{esc(title)}</title><style>{CSS}</style><script>{CHECK_SCRIPT}</script></head><body>",
           f"<h1>{esc(title)}</h1>"]
    nav = ['<a href="#warnings">warnings</a>', '<a href="#figures">figures</a>'] + \
        [f'<a href="#{esc(t.id)}">{esc(t.title.split(" (")[0].lower())}</a>' for t in tables]
    out.append(f"<nav>{''.join(nav)}</nav>")
    out.append(table(summary, heading=False))
    out.append('<section id="warnings"><h2>Warnings</h2>')
    if warnings:
        for head, details in warnings:
            out.append(f'<div class="warn">{esc(head)}')
            if details:
                items = "".join(f"<li>{esc(d)}</li>" for d in details)
                out.append(f"<details><summary>cells</summary><ul>{items}</ul></details>")
            out.append("</div>")
    else:
        out.append('<p class="note">none: no outliers, tails or wide intervals that call for a rerun</p>')
    out.append("</section>")
    out.append('<section id="figures"><h2>Figures</h2>')
    for fid, ftitle, png, caption in figures:
        out.append(figure(fid, ftitle, png, caption))
    if absent:
        out.append(f'<p class="note">Not shown: {esc(", ".join(absent))}.</p>')
    out.append("</section>")
    out += [table(t) for t in tables]
    if spec_toml:
        out.append(f'<section id="spec"><h2>Spec</h2><pre>{esc(spec_toml)}</pre></section>')
    out.append("</body></html>")
    return "\n".join(out) + "\n"
