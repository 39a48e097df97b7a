"""Text helpers shared by the minds and the tick (simulacra.text)."""

from simulacra.text import at_place, name_place_ids

PLACES = {"hobbs_cafe": "Hobbs Cafe", "park": "Johnson Park", "isabella_rodriguez_apartment": "Isabella's Apartment"}


def test_place_ids_in_an_activity_become_names_and_english_words_stay():
    assert name_place_ids("working at hobbs_cafe", PLACES) == "working at Hobbs Cafe"
    assert name_place_ids("back to Isabella_Rodriguez_Apartment, then HOBBS_CAFE", PLACES) == (
        "back to Isabella's Apartment, then Hobbs Cafe")
    assert name_place_ids("walking in the park", PLACES) == "walking in the park"  # an id that is a word
    assert name_place_ids("reading my_notes", PLACES) == "reading my_notes"  # not a place id
    assert name_place_ids("", PLACES) == ""
    # once named, the place is not added a second time
    assert at_place(name_place_ids("working at hobbs_cafe", PLACES), "Hobbs Cafe") == "working at Hobbs Cafe"
