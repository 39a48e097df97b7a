"""English text helpers shared by the modules that write or read sentences: the function words that text
heuristics (the extractive summariser, the offline reflector) start from, each adding the words of its own domain,
the one way a list of names is written in a sentence, and the one way an activity is placed (and freed of the
place ids a language model copies from its prompt)."""

import re
from collections.abc import Mapping, Sequence

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


def text_key(text: str) -> str:
    """The form two texts share when they say the same (spacing and case aside): what the night's summary groups
    episodes by and what an interview treats as one memory (a repeat, or a text still held)."""
    return " ".join(text.split()).casefold()


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


#: a word with an underscore: an identifier, not English (place ids such as ``hobbs_cafe``)
_IDENTIFIER = re.compile(r"\b\w*_\w*\b")


def name_place_ids(activity: str, place_names: Mapping[str, str]) -> str:
    """``activity`` with each place id it contains (a word with an underscore that is a key of ``place_names``,
    ignoring case) replaced by the place's name: a model shown "hobbs_cafe: Hobbs Cafe" among its places writes
    "working at hobbs_cafe", which residents would otherwise perceive and remember word for word. Other words are
    left alone (a place id without an underscore, such as ``park``, is also an English word)."""
    if "_" not in activity:
        return activity
    folded = {k.casefold(): v for k, v in place_names.items() if "_" in k}
    return _IDENTIFIER.sub(lambda m: folded.get(m.group(0).casefold(), m.group(0)), activity)
