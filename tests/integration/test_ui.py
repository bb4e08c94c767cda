"""The web view: its token gate and API over a real daemon, and the page in a real headless Chromium.

The browser tests drive Debian's chromium through chromedriver (selenium);
`.ci/run` installs both. Screenshots at desktop and phone widths are saved
in the test's tmp dir (pytest keeps the last runs' under its basetemp).
One daemon and one browser serve the module: each test that writes has a
tenant of its own, and each page test loads the page afresh at its size.
"""

from __future__ import annotations

import itertools
import json
import shutil
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from arbiter.client import Client
from arbiter.ui.server import UIServer
from tests.conftest import DaemonProcess, engine_daemon, wait_for

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"

TOPICS = [
    ["deploy", "release", "ci", "docker"],
    ["python", "parser", "tests", "lint"],
    ["budget", "invoice", "payment", "contract"],
]


SIZES = {"desktop": (1280, 800), "phone": (390, 844)}
# Note 29's content fills more than a screen: what is shown after it must still come into view.
LONG = "\n".join(f"Line {n} of the budget review: invoices, payments and the contract." for n in range(60))


@pytest.fixture(scope="module")
def shared(request):
    """The module's daemon (a real process on a real socket); on PostgreSQL for a test that parametrizes it
    indirectly with "postgresql" (`engine_daemon`)."""
    home = Path(tempfile.mkdtemp(prefix="arb-"))
    with engine_daemon(request, home) as d:
        yield d
    shutil.rmtree(home, ignore_errors=True)


class Tenant:
    """A tenant of the shared daemon: `client()` is its first user's, as `DaemonProcess.client` is the default's."""

    def __init__(self, daemon: DaemonProcess, token: str):
        self.socket, self.home, self.token = daemon.socket, daemon.home, token

    def client(self, token: str | None = None) -> Client:
        return Client(self.socket, token or self.token)


_names = itertools.count()


def _tenant(shared: DaemonProcess) -> Tenant:
    with shared.client(shared.admin_token) as admin:
        return Tenant(shared, admin.tenant_create(f"t{next(_names)}").token)


@pytest.fixture
def daemon(shared):
    """A fresh tenant of the module's daemon, so what one test writes no other test sees."""
    return _tenant(shared)


@pytest.fixture(scope="module")
def memory(shared):
    """30 entries in three tag topics across 2026, a chain of relations in each, one superseded entry.

    Three entries share each month's instant and each topic names one entity, so every kind of association
    joins them; entries of a topic differ by one word in their content, so similarity edges form too."""
    tenant = _tenant(shared)
    ids = []
    with tenant.client() as c:
        for i in range(30):
            topic = TOPICS[i % 3]
            ids.append(c.remember(
                type="project", title=f"Note {i} on {topic[0]}",
                content=f"About {' and '.join(topic)}, item {i}." + ("\n" + LONG if i == 29 else ""),
                tags=[topic[j] for j in range(4) if j != i % 4], valid_from=f"2026-{1 + i // 3:02d}-15T09:00:00Z",
                entities=[["Alice Martin", "Bob Stone", "Acme Ltd"][i % 3]],
            ).id)
        for i in range(3, 30):
            c.link(ids[i], "relates_to", ids[i - 3])
        c.entity_relate("Alice Martin", "knows", "Bob Stone")
        newer = c.remember(type="project", title="Note 0 revised", content="Deploy on Mondays now.",
                           tags=["deploy", "release", "ci"], supersedes_ids=[ids[0]]).id
    return {"ids": ids, "newer": newer, "tenant": tenant}


@pytest.fixture(scope="module")
def ui(memory):
    server = UIServer(memory["tenant"].client)
    server.start()
    # The idle writer derives similarity edges in the daemon's quiet spells after the writes: draw once they are
    # there, asking seldom enough to leave it quiet.
    wait_for(lambda: any(a["kind"] == "similarity" for a in json.loads(_get(server.url + "api/graph")[1])["associations"]),
             what="the similarity edges to be derived", interval=0.5)
    yield server
    server.shutdown()
    server.server_close()


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_nothing_is_served_without_the_token(ui):
    base = ui.url.rsplit("/", 2)[0]
    assert ui.url.startswith("http://127.0.0.1:")
    wrong = ("y" if ui.token[0] == "x" else "x") + ui.token[1:]  # one character off, never the token itself
    for path in ("/", "/index.html", "/static/app.js", "/api/graph", "/" + wrong + "/", "/" + ui.token[:-1] + "/"):
        status, body = _get(base + path)
        assert status == 404 and ui.token.encode() not in body and b"Arbiter" not in body
    status, body = _get(ui.url)
    assert status == 200 and b"force-graph.min.js" in body


@pytest.mark.parametrize("shared", ["sqlite", "postgresql"], indirect=True)
def test_api_reads_the_memory_through_the_client(ui, memory):
    status, body = _get(ui.url + "api/graph")
    graph = json.loads(body)
    assert status == 200
    assert len(graph["nodes"]) == 30  # 31 written, the superseded one retired
    with memory["tenant"].client() as client:
        assert [c["name"] for c in graph["clusters"]] == [c.name for c in client.topic_clusters().clusters]
    assert all(n["cluster"] is not None for n in graph["nodes"])
    assert sum(e["relation"] == "relates_to" for e in graph["edges"]) == 26  # the one touching the retired entry is not drawn
    status, body = _get(ui.url + "api/graph?as_of=2026-02-01T00:00:00Z")
    assert [n["id"] for n in json.loads(body)["nodes"]] == sorted(memory["ids"][:3], reverse=True)
    status, body = _get(ui.url + f"api/entry/{memory['ids'][0]}")
    detail = json.loads(body)
    assert status == 200 and not detail["visible"]  # retired now, still shown
    assert [e["id"] for e in detail["history"]["entries"]] == [memory["ids"][0], memory["newer"]]
    assert {b["entry"]["id"] for b in detail["backlinks"]["links"]} >= {memory["ids"][3]}
    status, body = _get(ui.url + "api/graph?view=entities")
    entities = json.loads(body)
    assert status == 200 and entities["view"] == "entities"
    assert {n["title"] for n in entities["nodes"]} >= {"Alice Martin", "Bob Stone", "Acme Ltd"}
    assert [e["relation"] for e in entities["edges"]] == ["knows"]
    # An entity takes the topic of the entries that mention it: Acme Ltd is named in the budget notes.
    budget = {n["cluster"] for n in graph["nodes"] if n["title"].endswith("on budget")}
    assert [n["cluster"] for n in entities["nodes"] if n["title"] == "Acme Ltd"] == list(budget)
    status, body = _get(ui.url + "api/entity?name=Bob%20Stone")
    assert status == 200 and json.loads(body)["entity"]["name"] == "Bob Stone"
    status, body = _get(ui.url + "api/recall?q=invoice")
    assert status == 200 and json.loads(body)["hits"]
    status, body = _get(ui.url + "api/entry/999999")
    assert status == 404 and json.loads(body)["error"]["name"] == "not_found"
    status, body = _get(ui.url + "api/recall?q=")
    assert status == 400


@pytest.fixture(scope="module")
def chromium():
    if not shutil.which("chromium") and not shutil.os.path.exists(CHROMIUM):
        pytest.skip("chromium is not installed (.ci/run installs Debian's chromium and chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="arb-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                f"--user-data-dir={profile}", "--window-size=1280,800"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def browser(chromium):
    """The module's browser at desktop size; a test loads its page itself."""
    chromium.set_window_size(*SIZES["desktop"])
    return chromium


def _open(browser, url: str, size: str) -> None:
    """Load the page afresh at `size` (the window is resized first, so the page starts in that layout)."""
    browser.set_window_size(*SIZES[size])
    browser.get(url)
    _settled(browser)



def _point_at(browser, entry_id: int):
    """Move the pointer over the node of `entry_id` where the canvas drew it; the canvas element."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    x, y = _js(browser, f"""(() => {{
        const g = window.arbiter.graph, n = g.graphData().nodes.find(n => n.id === {entry_id});
        const p = g.graph2ScreenCoords(n.x, n.y); return [p.x, p.y]; }})()""")
    canvas = browser.find_element(By.CSS_SELECTOR, "#graph canvas")
    size = canvas.size
    ActionChains(browser).move_to_element_with_offset(canvas, x - size["width"] / 2, y - size["height"] / 2).perform()
    return canvas

def _js(driver, expr: str):
    return driver.execute_script(f"return {expr};")


def _loaded(driver, loads: int) -> None:
    """Wait for the page's `loads`th load, with the search and the open entry it carries over (not the layout)."""
    wait_for(lambda: _js(driver, f"window.arbiter.loads >= {loads}"), timeout=30, what=f"load {loads}")


def _settled(driver, loads: int = 1) -> None:
    wait_for(lambda: _js(driver, f"window.arbiter && window.arbiter.loads >= {loads} && window.arbiter.settled"),
             timeout=30, what="the page to draw and settle")


def test_the_page_in_chromium(ui, memory, browser, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    browser.get(ui.url)
    _settled(browser)
    assert _js(browser, "window.arbiter.nodes") == 30
    legend = [li.text for li in browser.find_elements(By.CSS_SELECTOR, "#topics li")]
    assert len(legend) == 3 and all(legend)
    with urllib.request.urlopen(ui.url + "api/graph") as r:
        names = [c["name"] for c in json.load(r)["clusters"]]
    assert [line.rsplit("\n", 1)[0] for line in legend] == names  # the briefing's names, in its order
    browser.save_screenshot(str(tmp_path / "desktop.png"))

    # Click a node where the canvas drew it.
    target = memory["ids"][29]
    canvas = _point_at(browser, target)
    # The graph finds what the pointer is over on its next frame: click once it shows the pointer cursor.
    wait_for(lambda: "clickable" in canvas.get_attribute("class"), what="the pointer to be over the node")
    ActionChains(browser).click().perform()
    wait_for(lambda: _js(browser, "window.arbiter.selected") == target, what="the node click to select the entry")
    assert browser.find_element(By.ID, "entry-title").text == "Note 29 on budget"
    detail = browser.find_element(By.ID, "detail").text
    assert "valid 2026-10-15" in detail and "recorded " in detail

    # Search: hits listed and highlighted.
    box = browser.find_element(By.ID, "q")
    box.send_keys("invoice", Keys.ENTER)
    wait_for(lambda: _js(browser, "window.arbiter.hits"), what="recall hits")
    assert browser.find_elements(By.CSS_SELECTOR, "#hits li")

    # Move the time slider to its start: the memory as it stood in January.
    slider = browser.find_element(By.ID, "time")
    slider.send_keys(Keys.HOME)
    _settled(browser, loads=2)
    assert _js(browser, "window.arbiter.nodes") == 3  # the three entries of its first instant
    assert browser.find_element(By.ID, "time-label").text.startswith("2026-01-15")
    browser.save_screenshot(str(tmp_path / "desktop-as-of.png"))

    # The entities view: switch, draw, click through to an entity.
    from selenium.webdriver.support.ui import Select

    slider.send_keys(Keys.END)  # back to now: the entities were all named today
    _settled(browser, loads=3)
    Select(browser.find_element(By.ID, "view")).select_by_value("entities")
    _settled(browser, loads=4)
    assert _js(browser, "window.arbiter.nodes") >= 3
    browser.save_screenshot(str(tmp_path / "desktop-entities.png"))

    # A phone: the cluster-and-list view, no canvas drawing.
    browser.set_window_size(390, 844)
    browser.get(ui.url)
    _settled(browser)
    assert not browser.find_element(By.ID, "graph").is_displayed()
    sections = browser.find_elements(By.CSS_SELECTOR, "#lists h2.cluster")
    assert len(sections) == 3
    browser.find_elements(By.CSS_SELECTOR, "#lists button")[0].click()
    wait_for(lambda: _js(browser, "window.arbiter.selected"), what="a list entry to open")
    browser.save_screenshot(str(tmp_path / "phone.png"))
    assert (tmp_path / "phone.png").stat().st_size > 1000


def _pairs(associations, kind: str, evidence: str | None = None) -> set[tuple[int, int]]:
    return {(min(a["source"], a["target"]), max(a["source"], a["target"])) for a in associations
            if a["kind"] == kind and (evidence is None or a["evidence"] == evidence)}


def _chain(ids) -> set[tuple[int, int]]:
    ids = sorted(ids)
    return set(itertools.pairwise(ids))


def test_the_graph_carries_the_associations_among_the_drawn_entries(ui, memory):
    """Derived edges, chained per kind: a month's notes (one instant) in time, a topic's notes by their entity."""
    ids, graph = memory["ids"], json.loads(_get(ui.url + "api/graph")[1])
    drawn = {n["id"] for n in graph["nodes"]}
    assert {a["kind"] for a in graph["associations"]} == {"temporal", "entity", "similarity"}
    assert all({a["source"], a["target"]} <= drawn for a in graph["associations"])
    months = [[ids[i] for i in range(m * 3, m * 3 + 3) if i] for m in range(10)]  # note 0 is retired
    assert _pairs(graph["associations"], "temporal") == set().union(*(_chain(m) for m in months))
    for k, name in enumerate(["Alice Martin", "Bob Stone", "Acme Ltd"]):
        assert _pairs(graph["associations"], "entity", f"both mention {name}") == _chain(ids[k or 3::3])
    topic = {i: n % 3 for n, i in enumerate(ids)}
    assert all(topic[a] == topic[b] for a, b in _pairs(graph["associations"], "similarity"))
    past = json.loads(_get(ui.url + "api/graph?as_of=2026-02-01T00:00:00Z")[1])
    assert {(a["kind"], a["source"], a["target"]) for a in past["associations"]} == \
        {("temporal", ids[1], ids[0]), ("temporal", ids[2], ids[1])}  # one instant; no shared entity or words
    entities = json.loads(_get(ui.url + "api/graph?view=entities")[1])
    assert entities["associations"] == []


def _on_screen(browser, css: str) -> bool:
    """Whether the element is inside the viewport and on top there (not under another element)."""
    return _js(browser, f"""(() => {{
        const e = document.querySelector({json.dumps(css)}); if (!e) return false;
        const r = e.getBoundingClientRect();
        if (!r.height || r.top < 0 || r.bottom > window.innerHeight) return false;
        return e.contains(document.elementFromPoint(r.left + Math.min(10, r.width / 2), r.top + r.height / 2)); }})()""")


def _search(browser, query: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    _js(browser, "window.arbiter.hits = null")
    box = browser.find_element(By.ID, "q")
    box.clear()
    box.send_keys(query, Keys.ENTER)
    wait_for(lambda: _js(browser, "window.arbiter.hits") is not None, what="recall hits")


@pytest.mark.parametrize("size", SIZES)
def test_what_a_tap_or_a_search_shows_comes_into_view(ui, memory, browser, size, tmp_path):
    """On a phone the detail and the hits landed ~1,400 px down a page that stayed put; on a desktop the hits fell
    below a long entry in the side panel. Recall's missing note showed as a literal "null"."""
    from selenium.webdriver.common.by import By

    _open(browser, ui.url, size)
    if size == "phone":
        button = browser.find_elements(By.CSS_SELECTOR, "#lists button")[0]  # at the top: the panel is far below
        title = button.text.split(" ", 1)[1]
        button.click()
        wait_for(lambda: browser.find_elements(By.ID, "entry-title"), what="the entry to open")
        assert browser.find_element(By.ID, "entry-title").text == title
        assert _on_screen(browser, "#entry-title")
        browser.save_screenshot(str(tmp_path / "phone-entry.png"))
        browser.find_element(By.ID, "close").click()  # back to the list, where the finger was
        assert not browser.find_element(By.ID, "side").is_displayed() and button.is_displayed()
    _search(browser, "invoice")
    assert _on_screen(browser, "#hits h2")
    assert "null" not in browser.find_element(By.ID, "hits").text
    assert browser.find_element(By.CSS_SELECTOR, "#hits h2").text.lower() == "recall: 10 hits"
    hit = next(b for b in browser.find_elements(By.CSS_SELECTOR, "#hits button") if b.text.endswith("Note 29 on budget"))
    _js(browser, "window.arbiter.selected = null")  # the phone may have opened this entry from the list
    hit.click()
    wait_for(lambda: _js(browser, "window.arbiter.selected") == memory["ids"][29], what="the hit to open")
    assert _on_screen(browser, "#entry-title")
    _search(browser, "deploy")  # with a long entry open above the hits
    assert _on_screen(browser, "#hits h2")
    assert "null" not in browser.find_element(By.ID, "hits").text
    browser.save_screenshot(str(tmp_path / f"{size}-hits.png"))


def test_nodes_are_labelled_at_a_readable_zoom_and_associations_drawn_by_kind(ui, memory, browser):
    """The graph was unlabelled dots with only replies and relations drawn."""
    from selenium.webdriver.common.by import By

    _open(browser, ui.url, "desktop")
    titles = {f"Note {i} on {TOPICS[i % 3][0]}" for i in range(1, 30)} | {"Note 0 revised"}

    def labels_after(action: str) -> set[str]:
        """The labels of the first frame drawn after `action`."""
        _js(browser, f"(window.arbiter.labels = null, {action}, 1)")
        wait_for(lambda: _js(browser, "window.arbiter.labels !== null"), what="a frame after " + action)
        return set(_js(browser, "window.arbiter.labels"))

    def on_screen() -> set[str]:
        return set(_js(browser, """(() => { const g = window.arbiter.graph, c = g.graph2ScreenCoords;
            return g.graphData().nodes.filter(n => { const p = c(n.x, n.y);
              return p.x >= 0 && p.y >= 0 && p.x <= g.width() && p.y <= g.height(); }).map(n => n.title); })()"""))

    # 30 nodes fitted: a readable zoom, where a label that would overlap one already drawn is left out.
    fitted = labels_after("window.arbiter.graph.zoomToFit(0, 30)")
    assert fitted and fitted <= on_screen() == titles
    closer = labels_after("(n => window.arbiter.graph.centerAt(n.x, n.y, 0).zoom(10, 0))(window.arbiter.graph"
                          ".graphData().nodes.find(n => n.title === 'Note 14 on budget'))")
    assert "Note 14 on budget" in closer and closer == on_screen() and closer < titles  # only what is on screen
    assert labels_after("window.arbiter.graph.zoom(0.5, 0)") == set()  # dots too close for labels to read
    # ... and derived links too many to follow: only the asserted ones are drawn out there.
    drawn_kinds = "(() => { const g = window.arbiter.graph, v = g.linkVisibility(); " \
                  "return [...new Set(g.graphData().links.filter(v).map(l => l.kind))].sort(); })()"
    assert _js(browser, drawn_kinds) == ["relation"]
    _search(browser, "invoice")  # zoomed out, the hits keep their labels (where they fit)
    budget = {f"Note {i} on budget" for i in range(2, 30, 3)}
    zoomed_out = labels_after("window.arbiter.graph.zoom(0.5, 0)")
    assert zoomed_out and zoomed_out <= budget
    assert labels_after("window.arbiter.graph.zoomToFit(0, 30)") & budget

    # Every link kind drawn, in one colour of its own, and listed in the legend with its count.
    colours = _js(browser, """(() => { const g = window.arbiter.graph, colour = g.linkColor(), out = {};
        for (const l of g.graphData().links) (out[l.kind] = out[l.kind] || []).push(colour(l));
        return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, [...new Set(v)]])); })()""")
    assert set(colours) == {"relation", "temporal", "entity", "similarity"}
    assert all(len(c) == 1 for c in colours.values()) and len({c[0] for c in colours.values()}) == 4
    graph = json.loads(_get(ui.url + "api/graph")[1])

    def legend() -> dict:
        return {li.text.rsplit("\n", 1)[0]: li for li in browser.find_elements(By.CSS_SELECTOR, "#link-kinds li")}

    derived = {k: sum(a["kind"] == k for a in graph["associations"]) for k in ("temporal", "entity", "similarity")}
    assert _js(browser, drawn_kinds) == ["entity", "relation", "similarity", "temporal"]  # fitted: readable
    assert {name: int(li.text.rsplit("\n", 1)[1]) for name, li in legend().items()} == {
        "relations": len(graph["edges"]), "close in time": derived["temporal"], "same entity": derived["entity"],
        "similar words": derived["similarity"]}
    shown = "(() => { const g = window.arbiter.graph, v = g.linkVisibility(); " \
            "return g.graphData().links.filter(l => l.kind === 'entity').map(v); })()"
    legend()["same entity"].click()  # hide one kind, then show it again
    assert not any(_js(browser, shown)) and all(_js(browser, shown.replace("'entity'", "'temporal'")))
    legend()["same entity"].click()
    assert all(_js(browser, shown))


@pytest.mark.parametrize("size", SIZES)
def test_highlights_and_details_follow_the_view_and_the_time(ui, memory, browser, size):
    """The hits' highlights were dropped by a view change and kept stale by the slider; an entry's detail stayed
    open in the entities view (whose ids are other numbers) and did not follow the slider."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    ids = memory["ids"]
    budget = sorted(ids[i] for i in range(2, 30, 3))

    def highlighted() -> list[int]:
        if size == "phone":  # the list view marks them
            marked = [int(b.text.split()[0][1:]) for b in browser.find_elements(By.CSS_SELECTOR, "#lists button.hit")]
            assert sorted(marked) == sorted(_js(browser, "window.arbiter.highlighted"))
        return sorted(_js(browser, "window.arbiter.highlighted"))

    def close_sheet():
        if size == "phone" and browser.find_element(By.ID, "side").is_displayed():
            browser.find_element(By.ID, "close").click()

    _open(browser, ui.url, size)
    _search(browser, "invoice")
    assert highlighted() == budget
    _js(browser, f"select({ids[29]})")
    wait_for(lambda: _js(browser, "window.arbiter.selected") == ids[29], what="the entry to open")
    close_sheet()

    browser.find_element(By.ID, "time").send_keys(Keys.HOME)  # January: only note 2 of the budget notes yet
    _loaded(browser, 2)
    as_of = _js(browser, "state.asOf")
    hits = json.loads(_get(ui.url + "api/recall?" + urllib.parse.urlencode({"q": "invoice", "as_of": as_of}))[1])["hits"]
    assert [h["id"] for h in hits] == [ids[2]] and highlighted() == [ids[2]]
    assert browser.find_element(By.CSS_SELECTOR, "#hits h2").get_attribute("textContent") == \
        f"Recall: 1 hit as of {as_of[:10]}"
    assert "not visible at this time" in browser.find_element(By.ID, "entry-who").get_attribute("textContent")
    browser.find_element(By.ID, "time").send_keys(Keys.END)
    _loaded(browser, 3)
    assert highlighted() == budget
    assert "not visible" not in browser.find_element(By.ID, "entry-who").get_attribute("textContent")

    Select(browser.find_element(By.ID, "view")).select_by_value("entities")
    _loaded(browser, 4)
    assert not browser.find_elements(By.ID, "entry-title")  # the entry's detail is gone with its view
    assert _js(browser, "window.arbiter.selected") is None and highlighted() == []
    assert len(browser.find_elements(By.CSS_SELECTOR, "#hits li")) == 10  # hits are entries: listed, not drawn
    _js(browser, "selectEntity('Bob Stone')")
    wait_for(lambda: browser.find_elements(By.ID, "entry-title"), what="the entity to open")
    close_sheet()
    Select(browser.find_element(By.ID, "view")).select_by_value("entries")
    _loaded(browser, 5)
    assert not browser.find_elements(By.ID, "entry-title") and _js(browser, "window.arbiter.selected") is None
    assert highlighted() == budget


@pytest.fixture
def team_ui(daemon):
    """bob's web view: alice shares a thread with team `core` (bob's), keeps one note to herself, names an entity in it."""
    from arbiter.client import Client

    with daemon.client() as owner:
        tokens = {name: owner.user_add(name).token for name in ("alice", "bob")}
    with Client(daemon.socket, tokens["alice"]) as alice, Client(daemon.socket, tokens["bob"]) as bob:
        alice.team_add("core")
        alice.team_join("core", "bob")
        shared = alice.remember(type="project", title="Core roadmap", content="Ship the parser in May.",
                                tags=["parser"], team="core", entities=["Acme Ltd"])
        private = alice.remember(type="project", title="Alice only", content="A private worry.",
                                 tags=["parser"], entities=["Zed Secretco"])
        reply = bob.reply(shared.id, "Agreed, May it is.")
        own = bob.remember(type="user", title="Bob's own", content="Bob's private note.")
    server = UIServer(lambda: Client(daemon.socket, tokens["bob"]))
    server.start()
    yield server, {"shared": shared.id, "private": private.id, "reply": reply.id, "own": own.id}
    server.shutdown()
    server.server_close()


def test_the_view_shows_what_its_user_sees(team_ui):
    ui, ids = team_ui
    status, body = _get(ui.url + "api/whoami")
    assert status == 200 and (json.loads(body)["user"], json.loads(body)["teams"]) == ("bob", ["core"])
    graph = json.loads(_get(ui.url + "api/graph")[1])
    assert sorted(n["id"] for n in graph["nodes"]) == sorted([ids["shared"], ids["reply"], ids["own"]])
    assert [(e["source"], e["target"]) for e in graph["edges"]] == [(ids["reply"], ids["shared"])]
    # Derived edges only among what bob sees: alice's private note, written the same minute, joins none of them.
    drawn = {n["id"] for n in graph["nodes"]}
    assert graph["associations"] and all({a["source"], a["target"]} <= drawn for a in graph["associations"])
    entities = json.loads(_get(ui.url + "api/graph?view=entities")[1])
    assert [n["title"] for n in entities["nodes"]] == ["Acme Ltd"]  # never the entity only alice's note names
    status, body = _get(ui.url + f"api/entry/{ids['private']}")
    assert status == 404 and json.loads(body)["error"]["name"] == "not_found"
    detail = json.loads(_get(ui.url + f"api/entry/{ids['shared']}")[1])
    assert (detail["entry"]["author"], detail["entry"]["team"]) == ("alice", "core")
    assert [b["entry"]["id"] for b in detail["backlinks"]["links"]] == [ids["reply"]]
    hits = json.loads(_get(ui.url + "api/recall?q=private")[1])["hits"]
    assert [h["id"] for h in hits] == [ids["own"]]


def test_the_entry_panel_names_author_and_team_in_chromium(team_ui, browser, tmp_path):
    from selenium.webdriver.common.by import By

    ui, ids = team_ui
    browser.get(ui.url)
    _settled(browser)
    wait_for(lambda: _js(browser, "window.arbiter.user") == "bob", what="the page to say who it reads as")
    assert browser.find_element(By.ID, "who").text == "bob · core"
    assert _js(browser, "window.arbiter.nodes") == 3
    _js(browser, f"select({ids['shared']})")  # the canvas click itself is test_the_page_in_chromium's
    wait_for(lambda: _js(browser, "window.arbiter.selected") == ids["shared"], what="the entry to open")
    assert "by alice · shared with core" in browser.find_element(By.ID, "entry-who").text
    _js(browser, f"select({ids['own']})")
    wait_for(lambda: _js(browser, "window.arbiter.selected") == ids["own"], what="bob's note to open")
    assert "by bob · private" in browser.find_element(By.ID, "entry-who").text
    browser.save_screenshot(str(tmp_path / "desktop-team.png"))


def test_a_title_holding_html_is_shown_as_text_in_the_hover_label(daemon, browser):
    """force-graph writes a string label into its tooltip as HTML: a title's markup must stay text."""

    title = 'Plan <b id="injected">bold</b><img id="injected-img" src="x">'
    with daemon.client() as c:
        target = c.remember(type="project", title=title, content="A title with markup in it.").id
        c.remember(type="project", title="Another note", content="So the graph has two nodes.")
    server = UIServer(daemon.client)
    server.start()
    try:
        browser.get(server.url)
        _settled(browser)
        _point_at(browser, target)
        label = wait_for(lambda: _js(browser, "(document.querySelector('.float-tooltip-kap') || {}).textContent"),
                         what="the hover label")
        assert label == f"#{target} {title}"
        assert not _js(browser, "document.getElementById('injected') || document.getElementById('injected-img')")
    finally:
        server.shutdown()
        server.server_close()


def test_an_entity_shows_for_a_teammate_only_from_when_an_entry_they_see_names_it(daemon):
    """alice's private note creates an entity; bob names it later: his view must not show it, or date it, before."""
    from arbiter.client import Client

    with daemon.client() as owner:
        tokens = {name: owner.user_add(name).token for name in ("alice", "bob")}
    with Client(daemon.socket, tokens["alice"]) as alice, Client(daemon.socket, tokens["bob"]) as bob:
        secret = alice.remember(type="project", title="Alice only", content="A private worry.", entities=["Zed Secretco"])
        own = bob.remember(type="project", title="Bob's note", content="Bob meets them.", entities=["Zed Secretco"])
    server = UIServer(lambda: Client(daemon.socket, tokens["bob"]))
    server.start()
    try:
        between = urllib.parse.quote(secret.recorded_at)
        status, body = _get(server.url + f"api/graph?view=entities&as_of={between}")
        assert status == 200 and json.loads(body)["nodes"] == []
        nodes = json.loads(_get(server.url + "api/graph?view=entities")[1])["nodes"]
        assert [(n["title"], n["valid_from"]) for n in nodes] == [("Zed Secretco", own.recorded_at)]
    finally:
        server.shutdown()
        server.server_close()


def test_after_the_daemon_restarts_on_new_code_the_page_says_to_restart_the_view(home, tmp_path):
    """An upgrade restarts the daemon on new code while `arbiter ui` keeps the old: restarting the daemon
    (what every other client says) would not help; the view is the one to restart. Daemon down: 503."""
    import arbiter
    from arbiter.client import Client
    from tests.conftest import DaemonProcess

    upgraded = tmp_path / "upgraded"
    shutil.copytree(Path(arbiter.__file__).parent, upgraded / "arbiter",
                    ignore=shutil.ignore_patterns("__pycache__"))
    with open(upgraded / "arbiter" / "verbs.py", "a") as f:
        f.write("\n# an upgrade\n")
    first = DaemonProcess(home).start()
    server = UIServer(lambda: Client(first.socket, first.token))
    server.start()
    try:
        assert _get(server.url + "api/whoami")[0] == 200
        first.stop()
        status, body = _get(server.url + "api/whoami")
        assert status == 503 and json.loads(body)["error"]["name"] == "unavailable"
        again = DaemonProcess(home, extra_env={"PYTHONPATH": str(upgraded)}, cwd=upgraded).start()
        try:
            status, body = _get(server.url + "api/graph")
            error = json.loads(body)["error"]
            assert status == 503 and error["name"] == "daemon_outdated"
            assert "arbiter ui" in error["message"] and "arbiter serve" not in error["message"]
        finally:
            again.stop()
    finally:
        server.shutdown()
        server.server_close()


def test_the_page_says_when_it_is_empty_and_when_it_draws_only_the_newest(daemon, browser):
    """Empty, it asked to click a node there was none of; past the limit it called the newest "the first"."""
    from selenium.webdriver.common.by import By

    server = UIServer(daemon.client)
    server.start()
    try:
        browser.get(server.url)
        wait_for(lambda: _js(browser, "window.arbiter.loads") == 1, what="the empty page to load")
        assert "nothing remembered yet" in browser.find_element(By.ID, "status").text
        assert "Click a node" not in browser.find_element(By.ID, "detail").text
        _js(browser, "search('*')")  # recall says why it searched nothing; the page showed a bare "0 hits"
        wait_for(lambda: browser.find_elements(By.ID, "recall-note"), what="recall's note")
        assert "no searchable word" in browser.find_element(By.ID, "recall-note").text
        with daemon.client() as c:
            c.remember_many([{"type": "project", "title": f"n{i}", "content": f"note {i}"} for i in range(2001)])
        browser.get(server.url)
        wait_for(lambda: _js(browser, "window.arbiter.loads") == 1, timeout=30, what="2,000 nodes to load")
        assert browser.find_element(By.ID, "status").text == \
            "2000 entries, 0 links (the newest 2000 entries; older ones are not drawn)"
        assert "Click a node" in browser.find_element(By.ID, "detail").text
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("stop", ["SIGINT", "SIGTERM"])
def test_open_never_puts_the_token_on_a_command_line(shared, tmp_path, stop):
    """`ui --open` ran the browser with the URL, token and all, as an argument any local user reads (ps); the page
    that holds it goes with the server, whether it is stopped with Ctrl-C or `kill`."""
    import signal
    import stat
    import subprocess
    import sys

    from tests.conftest import isolated_env

    said = tmp_path / "browser-args"
    browser = tmp_path / "browser"
    browser.write_text(f'#!/bin/sh\nprintf "%s" "$1" > {said}\n')
    browser.chmod(0o700)
    ui = subprocess.Popen([sys.executable, "-m", "arbiter", "ui", "--open"], stdout=subprocess.PIPE, text=True,
                          env=isolated_env(shared.home, BROWSER=f"{browser} %s"))
    try:
        url = ui.stdout.readline().split()[2]
        token = url.rstrip("/").rsplit("/", 1)[1]
        argument = wait_for(lambda: said.exists() and said.read_text(), what="the browser to be started")
        assert token not in argument and argument.startswith("file://")
        page = Path(urllib.parse.unquote(argument.removeprefix("file://")))
        assert stat.S_IMODE(page.stat().st_mode) == 0o600 and url in page.read_text()
        assert _get(url)[0] == 200
    finally:
        ui.send_signal(getattr(signal, stop))
        try:
            ui.wait(10)
        except subprocess.TimeoutExpired:  # seen once in a while in a loaded suite, never alone: stop it as kill does
            ui.terminate()
            ui.wait(10)
        ui.stdout.close()
    assert not page.exists()  # gone with the server


@pytest.mark.parametrize("asides", [0, 2], ids=["bob sees most", "bob sees little"])
def test_a_teammates_private_entries_never_colour_date_or_order_an_entity(daemon, asides):
    """alice names "Acme Ltd" first, and most often, in private notes of another topic: bob's entity graph colours,
    dates and ranks it by the one shared entry he sees, as if her notes were not there; hers by all of them. With
    her asides, bob sees under half of the tenant's entries, and the graph counts from what he sees instead."""
    from arbiter.client import Client

    ops, money = ["deploy", "release", "ci"], ["budget", "invoice", "payment"]
    with daemon.client() as owner:
        tokens = {name: owner.user_add(name).token for name in ("alice", "bob")}
    with Client(daemon.socket, tokens["alice"]) as alice:
        alice.team_add("core")
        alice.team_join("core", "bob")
        first = alice.remember(type="project", title="Acme fees", content="Acme's invoice is late.", tags=money,
                               entities=["Acme Ltd"])
        for n in range(2):
            alice.remember(type="project", title=f"Acme fees {n}", content=f"Acme payment {n}.", tags=money,
                           entities=["Acme Ltd"])
        shared = alice.remember(type="project", title="Acme release", content="Acme ships the release.", tags=ops,
                                team="core", entities=["Acme Ltd"])
        beta = [alice.remember(type="project", title=f"Beta budget {n}", content=f"Beta's budget, line {n}.",
                               tags=money, team="core", entities=["Beta Corp"]) for n in range(2)]
        for n in range(asides):
            alice.remember(type="project", title=f"Aside {n}", content=f"An aside {n}.")

    def drawn(user: str) -> list[tuple[str, str, str]]:
        server = UIServer(lambda: Client(daemon.socket, tokens[user]))
        server.start()
        try:
            graph = json.loads(_get(server.url + "api/graph?view=entities")[1])
        finally:
            server.shutdown()
            server.server_close()
        named = {i: "ops" if set(c["tags"]) == set(ops) else "money" for i, c in enumerate(graph["clusters"])}
        assert sorted(named.values()) == ["money", "ops"]
        return [(n["title"], named.get(n["cluster"]), n["valid_from"]) for n in graph["nodes"]]

    assert drawn("bob") == [("Beta Corp", "money", beta[0].recorded_at), ("Acme Ltd", "ops", shared.recorded_at)]
    assert drawn("alice") == [("Acme Ltd", "money", first.recorded_at), ("Beta Corp", "money", beta[0].recorded_at)]
