"""The labelled-query generator (simulacra.labels) on a small real run, read back by simulacra tune."""

import re

import pytest

from simulacra import tune as t
from simulacra.clock import MINUTES_PER_DAY, format_hhmm
from simulacra.errors import SimulacraError
from simulacra.labels import generate, generate_draws, main, read_facts, write
from simulacra.memory.lexical import tokenize
from tests.test_rescore import FROZEN, tiny_run


@pytest.fixture(scope="module")
def run(tmp_path_factory, rater_url, embedder):
    tmp = tmp_path_factory.mktemp("labels")
    with tiny_run(tmp, rater_url, embedder, "labels", FROZEN) as sim:
        sim.run(12)
    return sim.run_dir


def test_queries_are_grounded_in_the_trace(run):
    facts = read_facts(run)
    queries = [q for seed in range(6) for q in generate(run, seed=seed)]  # six draws: every form appears
    assert {"said", "who", "when"} <= {q["category"] for q in queries}
    by_id = {op["id"]: (agent, op) for agent, ops in facts.adds.items() for op in ops}
    name_of = facts.names
    talks = lasts = 0
    for q in queries:
        assert q["expected"] and q["split"] in ("train", "heldout")
        for e in q["expected"]:
            agent, op = by_id[e["id"]]
            assert agent == q["agent"]  # the asker's own memory
            assert op["timestamp"] <= q["time"] <= facts.end  # formed before the question, asked within the run
        texts = [by_id[e["id"]][1]["text"] for e in q["expected"]]
        me = name_of[q["agent"]]
        if q["category"] == "said":
            m = re.fullmatch(r"What (?:did|was) (.+?) (?:say|tell|saying) .*?about (.+?)(?: when we talked)?\?",
                             q["query"])
            assert m, q["query"]
            words = m.group(2).split(" and ")
            for text in texts:
                line = text.split(": ", 1)[1]
                assert all(w in tokenize([line])[0] for w in words)  # the line is about the topic words
                speaker = me if m.group(1) == "I" else m.group(1)
                assert text.startswith(f"{speaker} said to ")
            if "the last time" in q["query"]:  # no later line between the two, up to the question, has the words
                lasts += 1
                first = by_id[q["expected"][0]["id"]][1]
                pair = first["text"].split(": ", 1)[0]
                later = [op for op in facts.adds[q["agent"]] if op["kind"] == "dialogue" and op["text"].startswith(
                    pair + ":") and first["timestamp"] < op["timestamp"] <= q["time"]
                    and all(w in tokenize([op["text"].split(": ", 1)[1]])[0] for w in words)]
                assert not later, (q["query"], later)
        elif q["category"] == "who":
            word = q["query"].rsplit(" ", 1)[1].rstrip("?")
            heard = q["query"].startswith("Who told") or "to me" in q["query"]
            both = q["query"].startswith("Who did I talk to")  # said or heard
            roles = ("listener", "speaker") if both else ("listener",) if heard else ("speaker",)
            for op in (by_id[e["id"]][1] for e in q["expected"]):
                text = op["text"]
                if op["kind"] == "conversation":  # the asker's memory of the conversation names the word too
                    talks += 1
                    talk = next(c for c in facts.conversations
                                if c["summary"] == text and c["time"] == op["timestamp"])
                    # after the frame "<a> talked with <b> at <place>.": who told whom what, or what each was doing
                    body = re.sub(r"^.+? talked with .+? at .+?\. ", "", text, count=1)
                    assert body != text and q["agent"] in talk["participants"] and word in tokenize([body])[0]
                    lines = [ln for ln in facts.lines if facts.conversations[ln["conversation"]] is talk]
                    assert any(any(ln[r] == q["agent"] for r in roles) and word in tokenize([ln["text"]])[0]
                               for ln in lines)  # a line of it was heard (said) by the asker
                    continue
                speaker, rest = text.split(" said to ", 1)
                listener = rest.split(":", 1)[0]
                sides = {"listener": listener, "speaker": speaker}
                assert me in {sides[r] for r in roles} and word in tokenize([rest.split(":", 1)[1]])[0]
        elif q["category"] == "when" and " last " in q["query"]:  # one conversation: its summary, lines, sight
            other = q["query"].rsplit(" ", 2)[-2:]
            times = {by_id[e["id"]][1]["timestamp"] for e in q["expected"]}
            assert max(times) - min(times) <= 10 and " ".join(other).rstrip("?") in " ".join(texts)
            assert any(by_id[e["id"]][1]["kind"] == "conversation" for e in q["expected"])
        elif q["category"] == "when" and " at " in q["query"] and "doing" in q["query"] or "Where was" in q["query"]:
            clock = re.search(r"(\d\d:\d\d)", q["query"]).group(1)
            person = re.search(r"(?:was|see) (.+?) (?:doing|at)", q["query"]).group(1)
            for e in q["expected"]:
                op = by_id[e["id"]][1]
                assert format_hhmm(op["timestamp"]) == clock and op["text"].startswith(person + " ")
    assert talks  # some "who" answer is the conversation memory, not only the line
    assert lasts  # some "said" question asks for the last time


def test_generation_is_deterministic_and_tune_reads_it(run, tmp_path, embedder):
    a, b = generate(run, seed=0), generate(run, seed=0)
    assert a == b
    assert generate(run, seed=1) != a  # another seed draws other questions
    path = write(a, run.name, tmp_path / "q.yaml", str(run))
    info = t.read_run(run)
    queries = t.load_queries(path, info.start_minute)
    assert len(queries) == len(a) and {q.category for q in queries} == {q["category"] for q in a}
    prepared = t.prepare(run, queries, embedder, path, run=info)
    assert all(pq.relevant and not pq.missing for pq in prepared)  # every expected memory is in the stores
    cats = t.by_category(prepared, t.baseline_settings()["defaults"], info.config.memory)
    assert set(cats) == {q["category"] for q in a}
    timed = t.prepare(run, queries[:3], embedder, path, run=info, embed_time=True)
    assert any((x.inputs.distance != y.inputs.distance).any()
               for p, r in zip(prepared[:3], timed) for x, y in zip(p.tiers, r.tiers) if x.name != "static" and
               len(x.ids))
    assert t.timed_text("hello", 600.0) == "day 1 10:00: hello" and t.timed_text("x", None) == "x"


def test_draws_merge_without_repeats(run, tmp_path):
    """``--draws 3``: the questions of seeds 0, 1 and 2 in order, a question drawn again kept once."""
    keys = [(q["agent"], q["time"], q["query"]) for s in (0, 1, 2) for q in generate(run, seed=s)]
    merged = generate_draws(run, (0, 1, 2))
    assert [(q["agent"], q["time"], q["query"]) for q in merged] == list(dict.fromkeys(keys))
    assert len(keys) > len(merged) > len(generate(run, seed=0))  # the draws repeat some questions and add others
    assert generate_draws(run, (0,)) == generate(run, seed=0)
    out = tmp_path / "q.yaml"
    assert main([str(run), "--draws", "3", "--out", str(out)]) == 0
    assert "--seed 0 --draws 3`" in out.read_text(encoding="utf-8").splitlines()[0]
    assert len(t.load_queries(out, t.read_run(run).start_minute)) == len(merged)


def test_not_a_run_folder(tmp_path):
    with pytest.raises(SimulacraError, match="no trace"):
        generate(tmp_path)


def _generator(end: float = 1000.0, ratings=()):
    from simulacra.labels import RunFacts, _Generator

    adds = {"ann": [{"op": "add", "agent": "ann", "id": f"m{i}", "kind": "observation", "rating": r,
                     "text": f"thing {i}", "timestamp": 0.0, "tier": "short_term"} for i, r in enumerate(ratings)]}
    return _Generator(RunFacts("r", 0, {"ann": "Ann"}, end, adds=adds), seed=3, start=0.0)


def test_question_times_spread_over_the_whole_run():
    gen = _generator(end=1000.0)
    times = [gen.later(100.0) for _ in range(3000)]
    assert all(t % 10 == 0 and 110 <= t <= 1000 for t in times)
    assert min(times) == 110 and max(times) == 1000  # from 10 minutes after to the run's last tick
    assert 500 < sum(times) / len(times) < 600  # uniform over the span (mean 555), not only the next few hours
    assert gen.later(995.0) == 1000.0 and gen.later(1000.0) == 1000.0  # never after the run's end


def test_draws_are_stratified_by_importance():
    # 30 low-rated memories, 6 mid, 3 high, 2 unrated: a uniform draw of 6 would be mostly low
    ratings = [2] * 30 + [5] * 6 + [9] * 3 + [None] * 2
    gen = _generator(ratings=ratings)
    items = list(range(len(ratings)))
    picked = gen.pick(items, 6, lambda i: ratings[i])
    assert len(set(picked)) == 6
    assert sorted(ratings[i] or 0 for i in picked[:4]) == [0, 2, 5, 9]  # one from each stratum, then again
    assert [ratings[i] for i in picked[:3]] == [9, 5, 2]  # high first
    assert [ratings[i] for i in picked[4:]] == [9, 5]  # the second round, not more of the large low stratum
    everything = gen.pick(items, 100, lambda i: ratings[i])
    assert sorted(everything) == items  # all of them when asked for more than there are
    assert [ratings[i] for i in everything[-24:]] == [2] * 24  # the large stratum is left last
    assert _generator(ratings=ratings).pick(items, 6, lambda i: ratings[i]) == picked  # same seed, same draw


def test_clock_times_name_the_day_in_multi_day_runs():
    from simulacra.labels import _when

    assert _when(980.0, 420.0) == "16:20" and _when(980.0, 420.0, 1380.0) == "16:20"  # one day: no day needed
    assert _when(980.0, 420.0, 2900.0) == "16:20 on day 1"  # asked on day 2 about day 1: which day's 16:20
    assert _when(1440.0 + 980.0, 420.0) == "16:20 on day 2"


def test_the_shipped_generated_labels_are_those_of_a_fresh_run(tmp_path, rater_url, embedder):
    """``data/queries/tinyvale-keep-seed0.yaml`` is what ``python -m simulacra.labels`` writes for the run
    docs/tuning.md makes (``--world tests/data/tiny.yaml --personas-dir tests/data/personas --seed 0`` with the
    "keep" settings): a change to what residents perceive, say or remember that moves the trace fails here, and
    the generated files of ``data/queries`` are then made again (docs/tuning.md), instead of naming memories that
    no fresh run has (stop 37 shipped eight such files)."""
    from pathlib import Path

    import yaml

    from simulacra.config import load_config
    from simulacra.simulation import Simulation

    root = Path(__file__).resolve().parents[1]
    shipped = yaml.safe_load((root / "data" / "queries" / "tinyvale-keep-seed0.yaml").read_text(encoding="utf-8"))
    config = load_config(None, [f"rater.url={rater_url}", "simulation.seed=0", "memory.promote_threshold=0",
                                "memory.forget_floor=null"])
    with Simulation.create(root / "tests" / "data" / "tiny.yaml", config, personas_dir=root / "tests" / "data" /
                           "personas", db_dir=tmp_path, run_name=shipped["run"], embedder=embedder) as sim:
        sim.run(round(sim.world.run_minutes(1) / sim.world.tick_minutes))  # one game day, as run_sim.py runs it
    assert generate(sim.run_dir, seed=0) == shipped["queries"]
    info = t.read_run(sim.run_dir)
    queries = t.load_queries(root / "data" / "queries" / "tinyvale-keep-seed0.yaml", info.start_minute)
    prepared = t.prepare(sim.run_dir, queries, embedder, "tinyvale-keep-seed0.yaml", run=info)
    assert all(pq.relevant and not pq.missing for pq in prepared)


def test_a_plan_question_expects_the_plans_of_its_own_day():
    """Ann planned the same hours on days 1 and 2; "What did I plan for 17:00 on day 2?" is answered by day 2's
    plan memory alone (before stop 39 every earlier day's memory with the same clock span counted too)."""
    from simulacra.labels import RunFacts, _Generator

    day = MINUTES_PER_DAY
    text = "Ann Lee plans to be mending nets at the harbour from 16:00 to 18:00."

    def add(id_, text, kind, ts):
        return {"op": "add", "agent": "ann", "tier": "short_term", "id": id_, "text": text, "kind": kind, "rating": 3,
                "timestamp": float(ts)}

    adds = [add(f"p{d}", text, "plan", d * day + 16 * 60) for d in (0, 1)]
    # the day plans (at 07:00) and the night's plan summaries (at 23:30) list the item too: they answer as well
    adds += [add(f"day{d + 1}", f"Ann Lee's plan for day {d + 1}: 07:00-16:00 at home; 16:00-18:00 mending nets at "
                                "the harbour.", "plan", d * day + 7 * 60) for d in (0, 1)]
    adds += [add(f"sum{d + 1}", f"Ann Lee's plan for day {d + 1} (Monday): mending nets at the harbour "
                                "(16:00-18:00).", "summary", d * day + 23 * 60 + 30) for d in (0, 1)]
    # ... but not a day plan that lists other hours
    adds += [add("other", "Ann Lee's plan for day 2: 07:00-12:00 at home; 12:00-13:00 mending nets at the harbour.",
                 "plan", day + 6 * 60)]
    facts = RunFacts("two-days", 0, {"ann": "Ann Lee"}, float(2 * day + 60), adds={"ann": adds})
    asked = [q for seed in range(8) for q in _Generator(facts, seed, 7 * 60.0).plan(8)]
    assert {q["note"] for q in asked} == {"plan item 16:00-18:00"}
    for q in asked:
        d = 2 if q["query"].endswith("on day 2?") else 1
        summary = [f"sum{d}"] if q["time"] >= (d - 1) * day + 23 * 60 + 30 else []  # made by the time asked
        assert q["expected"] == [{"id": i} for i in [f"p{d - 1}", f"day{d}", *summary]], q
    assert any(q["query"].endswith("on day 2?") for q in asked) and any(q["query"].endswith("on day 1?")
                                                                         for q in asked)


def test_who_questions_ask_about_what_a_line_names_and_talking_to_goes_both_ways():
    """Ann told Ben about the bracket and Ben told her about it: "Who did I talk to about bracket?" expects both lines
    (a talk goes both ways), "Whom did I tell" her line alone, "Who told me" his; the word is one a determiner names
    ("the bracket"), not the rarer "cracked" or "looking" (stop 49's labels asked "Who did I talk to about long?")."""
    from simulacra.labels import RunFacts, _Generator

    lines = [("ann", "ben", "I was looking at the bracket, it cracked."),
             ("ben", "ann", "Aye, the bracket needs looking at.")]
    names = {"ann": "Ann Lee", "ben": "Ben Brook"}
    adds: dict[str, list[dict]] = {"ann": [], "ben": []}
    facts_lines = []
    for i, (s, li, text) in enumerate(lines):
        said = f'{names[s]} said to {names[li]}: "{text}"'
        ids = []
        for agent in (s, li):
            ids.append(f"{agent}{i}")
            adds[agent].append({"op": "add", "agent": agent, "tier": "short_term", "id": f"{agent}{i}", "text": said,
                                "kind": "dialogue", "rating": 4, "timestamp": 600.0 + 10 * i})
        facts_lines.append({"speaker": s, "listener": li, "text": text, "memory_ids": ids, "time": 600.0 + 10 * i,
                            "place": "forge", "conversation": 0})
    facts = RunFacts("pair", 0, names, 900.0, adds=adds, lines=facts_lines,
                     conversations=[{"time": 600.0, "participants": ["ann", "ben"], "summary": None}])
    asked = {(q["agent"], q["query"]): q for seed in range(40) for q in _Generator(facts, seed, 420.0).who(4)}
    assert {query.rsplit(" ", 1)[1] for _, query in asked} == {"bracket?"}
    forms = {(a, q.split(" about")[0]): [e["id"] for e in x["expected"] if x["time"] >= 610] for (a, q), x in
             asked.items()}
    assert forms.get(("ann", "Who did I talk to")) == ["ann0", "ann1"]  # her line and his, both
    assert forms.get(("ann", "Whom did I tell")) == ["ann0"] and forms.get(("ann", "Who told me")) == ["ann1"]


def test_a_topic_word_is_not_a_place_s_name_nor_a_day():
    """"Who told me about anchor?" asked after the talk of meeting at The Anchor and Gull, and "... about sunday?",
    name where and when, not what: the words of the world's place names and of the calendar are no topic."""
    from simulacra.labels import RunFacts, _Generator

    texts = ["Meet me at the Anchor on Sunday, we will talk about the lifeboat.",
             "This Sunday the lifeboat goes out."]  # "this Sunday" is a determiner's word, and a day's
    facts = RunFacts("one", 0, {"ann": "Ann Lee", "ben": "Ben Brook"}, 900.0, places=["The Anchor and Gull"],
                     lines=[{"speaker": "ann", "listener": "ben", "text": t, "memory_ids": [], "time": 600.0,
                             "place": "quay", "conversation": 0} for t in texts])
    for i in range(2):
        assert {w for seed in range(10) for w in _Generator(facts, seed, 420.0).topic(i)} == {"lifeboat"}
