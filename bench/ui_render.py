"""Web view benchmark: how long headless Chromium takes to draw the graph of N entries.

    python -m bench.ui_render [--entries 2000] [--links 1500] [--runs 3]
    python -m bench.ui_render --screenshots docs   # docs/ui.png, ui-entities.png, ui-phone.png

Starts its own daemon on a temporary home, writes --entries entries (tags
from bench/load's vocabulary, so topic clusters form) and --links random
`relates_to` relations, serves `arbiter ui` in-process and loads the page in
Debian's headless chromium (selenium + chromedriver) at 1280x800. Reported
per run: `first_frame_ms`, from navigation start to the first canvas frame
drawn with every node (the page's `window.arbiter.renderedAt`), and
`settled_ms`, when the force layout stops (120 ticks). Target: the first
frame under 2 s. Nothing is asserted.

`--screenshots DIR` instead writes the README's pictures of each view, of a
small team memory a reader can follow (`SCENE`): the entries graph with a
search and an entry open, the entities graph, and a phone with an entry open.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from arbiter import __version__
from arbiter.client import Client
from arbiter.errors import Conflict
from arbiter.ui.server import UIServer
from bench.load import BenchDaemon, Vocabulary, make_entry

TARGET_MS = 2000.0


def _browser(width: int, height: int):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                f"--user-data-dir={tempfile.mkdtemp(prefix='arb-chromium-')}", f"--window-size={width},{height}"):
        options.add_argument(arg)
    return webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"))


def run(args) -> dict:
    home = Path(tempfile.mkdtemp(prefix="arb-ui-"))
    daemon = BenchDaemon(home, "NORMAL")
    rng = random.Random(args.seed)
    vocab = Vocabulary(rng)
    try:
        with Client.from_home(home) as c:
            ids = c.remember_many([make_entry(vocab, rng, n) for n in range(args.entries)])
            for _ in range(args.links):
                a, b = rng.sample(ids, 2)
                try:
                    c.link(a, "relates_to", b)
                except Conflict:  # the pair is already linked
                    pass
        server = UIServer(lambda: Client.from_home(home))
        server.start()
        driver = _browser(1280, 800)
        runs = []
        try:
            for _ in range(args.runs):
                driver.get(server.url)
                deadline = time.monotonic() + 120
                while not driver.execute_script("return window.arbiter && window.arbiter.settled"):
                    if time.monotonic() > deadline:
                        raise SystemExit("the page did not settle within 120 s")
                    time.sleep(0.05)
                nodes, first, settled = driver.execute_script(
                    "return [window.arbiter.nodes, window.arbiter.renderedAt, performance.now()]"
                )
                runs.append({"nodes": nodes, "first_frame_ms": round(first, 1), "settled_ms": round(settled, 1)})
            if args.screenshot:
                driver.save_screenshot(str(args.screenshot))
        finally:
            driver.quit()
            server.shutdown()
        return {
            "version": __version__,
            "entries": args.entries,
            "links": args.links,
            "runs": runs,
            "first_frame_ms_median": statistics.median(r["first_frame_ms"] for r in runs),
            "target_ms": TARGET_MS,
        }
    finally:
        daemon.stop()
        shutil.rmtree(home, ignore_errors=True)


# (title, tags, entities, day of March 2026 and hour): a small team's memory, three topics.
SCENE = [
    ("Release 2.4 deploy plan", ["deploy", "release", "ci"], ["Alice Martin"], 2, 9),
    ("CI runners move to Docker", ["ci", "docker", "deploy"], ["Bob Stone"], 2, 15),
    ("Staging deploy failed on migrations", ["deploy", "release"], ["Alice Martin"], 5, 10),
    ("Rollback steps for release 2.4", ["release", "deploy"], ["Alice Martin"], 5, 16),
    ("Docker image size cut to 180 MB", ["docker", "ci"], ["Bob Stone"], 9, 11),
    ("Release 2.4 shipped", ["release", "deploy", "ci"], ["Alice Martin", "Acme Ltd"], 12, 17),
    ("Parser rewrite: goals", ["parser", "python", "tests"], ["Chen Wei"], 3, 10),
    ("Parser benchmark: 3x faster on large files", ["parser", "python"], ["Chen Wei"], 6, 14),
    ("Lint rules for the parser package", ["lint", "python"], ["Dana Cole"], 6, 18),
    ("Flaky parser test on Windows", ["tests", "parser"], ["Dana Cole"], 10, 9),
    ("Parser errors carry line and column", ["parser", "tests"], ["Chen Wei"], 11, 15),
    ("Type hints for the public parser API", ["python", "lint"], ["Dana Cole"], 13, 11),
    ("Acme contract renewal", ["contract", "budget"], ["Acme Ltd", "Eve Park"], 4, 9),
    ("Q2 budget for infrastructure", ["budget", "invoice"], ["Eve Park"], 4, 15),
    ("Acme invoice 1042 is late", ["invoice", "payment"], ["Acme Ltd"], 8, 10),
    ("Payment terms moved to 45 days", ["payment", "contract"], ["Acme Ltd", "Eve Park"], 8, 16),
    ("Budget review: cloud costs up 12%", ["budget", "invoice"], ["Eve Park"], 12, 10),
    ("Acme invoice 1042 paid", ["invoice", "payment"], ["Acme Ltd"], 14, 12),
]
# (source, relation, target) by index in SCENE.
SCENE_LINKS = [(2, "contradicts", 0), (3, "refines", 0), (5, "supports", 0), (1, "causes", 4), (7, "supports", 6),
               (10, "refines", 6), (9, "relates_to", 8), (11, "refines", 8), (14, "causes", 15), (17, "supersedes", 14),
               (16, "relates_to", 13), (12, "relates_to", 15)]


def screenshots(folder: Path) -> None:
    """Write ui.png (entries, desktop), ui-entities.png and ui-phone.png of `SCENE` into `folder`."""
    home = Path(tempfile.mkdtemp(prefix="arb-ui-"))
    daemon = BenchDaemon(home, "NORMAL")
    try:
        with Client.from_home(home) as c:
            ids = [c.remember(type="project", title=title, tags=tags, entities=entities,
                              content=f"{title}. Noted by {entities[0]} for the team.",
                              valid_from=f"2026-03-{day:02d}T{hour:02d}:00:00Z").id
                   for title, tags, entities, day, hour in SCENE]
            for a, relation, b in SCENE_LINKS:
                c.link(ids[a], relation, ids[b])
            c.reply(ids[2], "The migration locked the orders table; we retry with a batched backfill.")
            c.entity_relate("Alice Martin", "works_on", "Acme Ltd")
            c.entity_relate("Chen Wei", "knows", "Dana Cole")
        server = UIServer(lambda: Client.from_home(home))
        server.start()
        driver = _browser(1280, 800)
        try:
            def until(condition: str) -> None:
                deadline = time.monotonic() + 60
                while not driver.execute_script("return " + condition):
                    if time.monotonic() > deadline:
                        raise SystemExit(f"the page did not reach {condition!r} within 60 s")
                    time.sleep(0.05)

            def settle(loads: int = 1) -> None:
                until(f"window.arbiter.loads >= {loads} && window.arbiter.settled")

            driver.get(server.url)
            settle()
            driver.execute_script("search('invoice'); select(arguments[0])", ids[17])
            until(f"window.arbiter.selected === {ids[17]} && window.arbiter.hits")
            driver.save_screenshot(str(folder / "ui.png"))
            driver.execute_script("document.getElementById('q').value = ''; search('');"
                                  "const v = document.getElementById('view'); v.value = 'entities';"
                                  "v.dispatchEvent(new Event('change'))")
            settle(2)
            driver.execute_script("selectEntity('Acme Ltd')")
            until("window.arbiter.selected !== null")
            driver.save_screenshot(str(folder / "ui-entities.png"))
            driver.set_window_size(390, 844)
            driver.get(server.url)
            settle()
            driver.execute_script("select(arguments[0])", ids[2])
            until(f"window.arbiter.selected === {ids[2]}")
            driver.save_screenshot(str(folder / "ui-phone.png"))
        finally:
            driver.quit()
            server.shutdown()
    finally:
        daemon.stop()
        shutil.rmtree(home, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=2000)
    ap.add_argument("--links", type=int, default=1500)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--screenshot", type=Path)
    ap.add_argument("--screenshots", type=Path, help="write the README's pictures of each view here, and stop")
    args = ap.parse_args(argv)
    if args.screenshots:
        return screenshots(args.screenshots)
    print(json.dumps(run(args), indent=2))


if __name__ == "__main__":
    main()
