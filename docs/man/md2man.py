#!/usr/bin/env python3
"""Turns a man page written in a small Markdown subset into roff, gzipped (gzip -9n style).

    md2man.py SOURCE.md OUTPUT.gz --name dockhand --section 8 --version 0.1.0

The subset (what docs/man/*.md use):
  # NAME                     a section (.SH)
  ## Subsection              a subsection (.SS)
  `--opt ARG`                on a line of its own, then lines indented by 4: a tagged
      description            paragraph (.TP)
  - item                     a bullet list item
  ```                        a literal block (no filling)
  **bold**, *italic*, `code` inline (code is shown bold)
  a blank line               a new paragraph
"""
import argparse
import gzip
import re
import sys


def escape(text):
    text = text.replace("\\", "\\e")
    text = text.replace("-", "\\-")
    return text


def emphasis(text):
    text = escape(text)
    text = re.sub(r"\*\*([^*]+)\*\*", r"\\fB\1\\fR", text)
    return re.sub(r"(?<![\w*])\*([^*\s][^*]*)\*(?![\w*])", r"\\fI\1\\fR", text)


def inline(text):
    # Code spans are literal (no emphasis inside), shown bold.
    parts = re.split(r"`([^`]+)`", text)
    text = "".join(emphasis(p) if i % 2 == 0 else "\\fB" + escape(p) + "\\fR"
                   for i, p in enumerate(parts))
    if text.startswith((".", "'")):
        text = "\\&" + text
    return text


def convert(lines, name, section, version, date):
    out = [f'.TH {name.upper()} {section} "{date}" "{name} {version}" "Dockhand"']
    in_code = False
    tagged = False
    for raw in lines:
        line = raw.rstrip("\n")
        if line.startswith("```"):
            out.append(".EX" if not in_code else ".EE")
            if not in_code:
                out[-1:] = [".RS 4", ".nf"]
            else:
                out[-1:] = [".fi", ".RE"]
            in_code = not in_code
            continue
        if in_code:
            literal = escape(line)
            out.append("\\&" + literal if literal.startswith((".", "'")) else literal)
            continue
        if not line.strip():
            tagged = False
            out.append(".PP" if out[-1] not in (".PP",) and not out[-1].startswith(".S") else "")
            if out[-1] == "":
                out.pop()
            continue
        if line.startswith("## "):
            out.append(".SS " + inline(line[3:]))
        elif line.startswith("# "):
            out.append(".SH " + inline(line[2:].upper()))
        elif re.fullmatch(r"`[^`]+`", line.strip()) and not line.startswith(" "):
            out.append(".TP")
            out.append(inline(line.strip()))
            tagged = True
        elif line.startswith("    ") and tagged:
            out.append(inline(line.strip()))
        elif line.startswith("- "):
            out.append(".IP \\(bu 2")
            out.append(inline(line[2:]))
        else:
            out.append(inline(line.strip()))
    # Paragraph macros right before a section heading are noise.
    cleaned = []
    for item in out:
        if item.startswith((".SH", ".SS")) and cleaned and cleaned[-1] == ".PP":
            cleaned.pop()
        cleaned.append(item)
    return "\n".join(cleaned) + "\n"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("source")
    parser.add_argument("output")
    parser.add_argument("--name", required=True)
    parser.add_argument("--section", required=True)
    parser.add_argument("--version", required=True)
    parser.add_argument("--date", default="2025")
    args = parser.parse_args()
    with open(args.source, encoding="utf-8") as f:
        roff = convert(f.readlines(), args.name, args.section, args.version, args.date)
    data = roff.encode("utf-8")
    if args.output.endswith(".gz"):
        # mtime=0 and no file name: the same source gives the same bytes (reproducible).
        with open(args.output, "wb") as raw:
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as gz:
                gz.write(data)
    else:
        with open(args.output, "wb") as f:
            f.write(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
