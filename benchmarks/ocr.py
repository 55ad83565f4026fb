"""OCR engines on the synthetic DocVQA pages: character accuracy, seconds per page, and the
scripted oracle's ANLS when it reads each engine's text.

    python benchmarks/ocr.py --pages 20 [--engines rapidocr,tesseract] [--threads 1]
    python benchmarks/ocr.py --pages 20 --engines none --env-oracle   # through the sandbox

Character accuracy = 1 - Levenshtein(ocr, reference) / len(reference), both with every
run of whitespace collapsed to one space (engines order table cells differently; the
characters are what the agent needs); "order-free" compares the sorted lines instead, so
an engine that reads the lines in another order is not charged for it. The reference is
the exact printed text (`esopt.data.docs.page_text`). Seconds per page are wall time
after one warm-up page, one thread per engine (the sandbox runs tool calls single-threaded).
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import time


def levenshtein(a: str, b: str) -> int:
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def char_accuracy(text: str, reference: str) -> float:
    text, reference = " ".join(text.split()), " ".join(reference.split())
    return max(0.0, 1 - levenshtein(text, reference) / max(1, len(reference)))


def sorted_lines(text: str) -> str:
    """The lines, whitespace-collapsed and sorted: reading order no longer counts."""
    return "\n".join(sorted(" ".join(ln.split()) for ln in text.splitlines() if ln.strip()))


def engine_fn(name: str, threads: int):
    if name == "rapidocr":
        from esopt.tools import ocr

        ocr.engine.cache_clear()
        ocr.engine(threads)
        return lambda png: "\n".join(_rapid_lines(ocr, png, threads))
    if name == "tesseract":
        os.environ["OMP_THREAD_LIMIT"] = str(threads)
        import pytesseract
        from PIL import Image

        return lambda png: pytesseract.image_to_string(Image.open(io.BytesIO(png)))
    raise SystemExit(f"unknown engine {name!r}")


def _rapid_lines(ocr, png: bytes, threads: int) -> list[str]:
    result = ocr.engine(threads)(png)
    return ocr.group_lines(result.boxes.tolist(), result.txts) if result.txts else []


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pages", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--engines", default="rapidocr,tesseract")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--env-oracle", action="store_true",
                   help="also play the scripted oracle through make_env('docvqa'): the "
                        "sandbox, the shell and the OCR command, one uncached OCR per page")
    args = p.parse_args()

    from esopt.data.docs import page_text, synthetic_tasks
    from esopt.envs.anls import anls
    from esopt.envs.docvqa import oracle_answer

    tasks = synthetic_tasks(args.pages, args.seed)
    refs = [page_text(i, args.seed) for i in range(args.pages)]
    print(f"{args.pages} synthetic pages (seed {args.seed}), {args.threads} thread(s), "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'engine':<10} {'char acc mean':>13} {'min':>6} {'order-free':>10} "
          f"{'exact pages':>11} {'s/page':>7} {'oracle ANLS':>11}")
    for name in [e for e in args.engines.split(",") if e != "none"]:
        try:
            run = engine_fn(name, args.threads)
            run(tasks[0].image)  # warm-up: model load, first-call allocations
        except Exception as e:  # noqa: BLE001 - an engine that is not installed is reported
            print(f"{name:<10} unavailable: {type(e).__name__}: {e}")
            continue
        accs, free, secs, scores = [], [], [], []
        for task, ref in zip(tasks, refs, strict=True):
            start = time.perf_counter()
            text = run(task.image)
            secs.append(time.perf_counter() - start)
            accs.append(char_accuracy(text, ref))
            free.append(char_accuracy(sorted_lines(text), sorted_lines(ref)))
            scores.append(anls(oracle_answer(task.question, text), task.answers))
        exact = sum(a == 1.0 for a in accs)
        print(f"{name:<10} {statistics.mean(accs):>13.4f} {min(accs):>6.3f} "
              f"{statistics.mean(free):>10.4f} "
              f"{exact:>5}/{len(accs):<5} {statistics.mean(secs):>7.2f} "
              f"{statistics.mean(scores):>11.3f}")
    if args.env_oracle:
        env_oracle(args.pages, args.seed)



def env_oracle(pages: int, seed: int) -> None:
    """The oracle through the environment: mean reward (ANLS) and seconds per episode."""
    from esopt.envs import make_env
    from esopt.envs.docvqa import oracle_policy

    env = make_env("docvqa", data=f"synthetic:{pages}:{seed}")
    rewards, secs = [], []
    for i in range(pages):
        start = time.perf_counter()
        obs = env.reset(i)
        r = env.step(oracle_policy(obs))
        r = env.step(oracle_policy(r.observation))
        secs.append(time.perf_counter() - start)
        rewards.append(r.reward)
    print(f"env oracle: mean ANLS {statistics.mean(rewards):.3f}, exact "
          f"{sum(x == 1.0 for x in rewards)}/{pages}, {statistics.mean(secs):.2f} s/episode "
          "(one sandboxed OCR each)")


if __name__ == "__main__":
    main()
