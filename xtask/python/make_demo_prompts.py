#!/usr/bin/env python3
"""Writes assets/demo/specbench-prompts.json: the prompts `anyspec demo` gives SmolLM2.

The Spec-Bench categories (hemingkx/Spec-Bench, Apache-2.0), taken only from permissively
licensed sources so that the file can be committed:

- writing, roleplay, reasoning, math, coding, extraction, stem, humanities: the first turn of
  the first Spec-Bench (= MT-Bench, Apache-2.0) question of each category;
- math_reasoning: two Spec-Bench GSM8K questions (MIT);
- qa, rag: two Spec-Bench Natural Questions items each (NQ and its Wikipedia passages, CC BY-SA 3.0);
- translation: Spec-Bench's WMT14 items are research-use only, so German→English from FLORES-200
  dev (CC BY-SA 4.0), three consecutive sentences per prompt, in Spec-Bench's wording;
- summarization: Spec-Bench's CNN/DailyMail articles belong to their publishers, so two WikiText-2
  articles' first paragraphs (Wikipedia, CC BY-SA 3.0), in Spec-Bench's wording.

Usage: python3 xtask/python/make_demo_prompts.py ../shared/corpora assets/demo/specbench-prompts.json
"""

import json
import sys
from collections import defaultdict
from pathlib import Path

MT_BENCH = ["writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities"]


def main(corpora: Path, out: Path) -> None:
    by_category = defaultdict(list)
    for line in (corpora / "prompts-specbench" / "question.jsonl").read_text().splitlines():
        item = json.loads(line)
        by_category[item["category"]].append(item)
    prompts = []
    for category in MT_BENCH:
        item = by_category[category][0]
        prompts.append({"category": category, "group": "mt-bench", "source": f"Spec-Bench {item['question_id']}",
                        "prompt": item["turns"][0]})
    for category, count in [("math_reasoning", 2), ("qa", 2), ("rag", 2)]:
        for item in by_category[category][:count]:
            prompts.append({"category": category, "group": category.replace("_", " "),
                            "source": f"Spec-Bench {item['question_id']}", "prompt": item["turns"][0]})
    german = (corpora / "flores200-dev" / "deu_Latn.dev").read_text().splitlines()
    for start in (0, 10):
        text = " ".join(german[start:start + 3])
        prompts.append({"category": "translation", "group": "translation",
                        "source": f"FLORES-200 dev deu_Latn lines {start + 1}-{start + 3}",
                        "prompt": f"Translate German to English: {text}"})
    wiki = (corpora / "en-wikitext2" / "wikitext2_raw_test_part.txt").read_text().splitlines()
    articles = []
    for i, line in enumerate(wiki):
        if line.startswith(" = ") and not line.startswith(" = = "):
            title = line.strip(" =")
            body = []
            for follow in wiki[i + 1:]:
                if follow.startswith(" = "):
                    if body:
                        break
                    continue
                if follow.strip():
                    body.append(follow.strip())
            articles.append((title, " ".join(body)))
    for title, body in [articles[1], articles[3]]:
        # Undo WikiText's tokenization of hyphens and number separators.
        for marked, plain in ((" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", ".")):
            body = body.replace(marked, plain)
        text = body[:1800].rsplit(". ", 1)[0] + "."
        prompts.append({"category": "summarization", "group": "summarization",
                        "source": f"WikiText-2 test, article {title!r}",
                        "prompt": f"Summarize the following article:\n\n{text}"})
    out.write_text(json.dumps(prompts, ensure_ascii=False, indent=1) + "\n")
    print(f"{len(prompts)} prompts -> {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
