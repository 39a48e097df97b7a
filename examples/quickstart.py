"""The quick start as a script: a town of six Fernhollow residents for three game hours, offline, then what happened
read back as pandas DataFrames (``pip install 'simulacra[analysis]'``). Run it from any folder:
``python examples/quickstart.py``; the run goes to ``database/quickstart``."""

from simulacra import Town, open_run

AGENTS = ["bram_ostrowski", "ezra_pike", "greta_lund", "samuel_adeyemi", "leila_haddad", "ruth_calloway"]

with Town.create("fernhollow", agents=AGENTS, run_name="quickstart", overwrite=True,
                 simulation={"conversation_probability": 1.0}) as town:
    summary = town.run(hours=3)
    print(town.interview("ezra_pike", "What happened to the mill wheel?")["answer"])

for event in summary["events"]:
    print(f"{event['time']} known by {len(event['known_by'])}, remembered by {len(event['remembered_by'])}: "
          f"{event['text']}")

frames = open_run(town.run_dir).frames()
print(frames)
print(frames.diffusion.groupby("event_time")["known"].max())
print(frames.lines[["clock", "speaker", "listener", "text"]].head())
