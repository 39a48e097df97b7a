"""English text helpers shared by the modules that write or read sentences: the function words that text
heuristics (the extractive summariser, the offline reflector) start from, each adding the words of its own domain,
the one way a list of names is written in a sentence, and the one way an activity is placed."""

from collections.abc import Sequence

STOP_WORDS = frozenset("""
a about above after again against all almost also am an and any are aren't around as at away be because been
before being below between both but by can can't cannot could couldn't did didn't do does doesn't doing don't
done during each either else even ever every few for from further get gets getting go goes going gone goodbye
got had hadn't has hasn't have haven't having he he'd he'll he's hear heard hello her here here's hers herself
hi him himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself just let's like lot me
might more most much must my myself no nor not now of off oh ok okay on once only onto or other our ours
ourselves out over own quite rather really said same say says shall she she'd she'll she's should shouldn't so
some such tell tells than that that's the their theirs them themselves then there there's these they they'd
they'll they're they've thing things this those though through to told too toward towards under until up upon
us very was wasn't we we'd we'll we're we've well were weren't what what's when where where's whether which
while who who's whom whose why will with within without won't would wouldn't yes yet you you'd you'll you're
you've your yours yourself yourselves
""".split())


def join_words(items: Sequence[str]) -> str:
    """``items`` as an English list: ``"a"``, ``"a and b"``, ``"a, b and c"`` (no serial comma). Raises
    IndexError on an empty sequence: callers say what they list."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def at_place(activity: str, place_name: str) -> str:
    """``"<activity> at <place name>"``, or the activity alone when it names the place already (an imported
    town's "working at Hobbs Cafe" at Hobbs Cafe; compared ignoring case), or when there is no place name. Used for
    what agents perceive of each other, the focus query of retrieval, plan lines and the viewer."""
    if not place_name or place_name.casefold() in activity.casefold():
        return activity
    return f"{activity} at {place_name}"
