"""How questions talk about visual attributes: asking for one, or using one as a constraint."""

from __future__ import annotations

# (kind, attribute) -> question templates; {x} is the entity reference
ASK: dict[tuple[str, str], tuple[str, ...]] = {
    ("product", "shape"): ("What shape is the body of {x}?", "Which body shape does {x} have?"),
    ("product", "colour"): ("What colour is the body of {x}?", "Which colour is {x} painted in?"),
    ("product", "pattern"): ("What pattern covers {x}?", "Which surface pattern does {x} show?"),
    ("product", "logo_position"): ("Where is the logo placed on {x}?",
                                   "In which position does {x} carry its logo?"),
    ("product", "logo_colour"): ("What colour is the logo of {x}?",
                                 "Which colour does the logo on {x} have?"),
    ("product", "count"): ("How many units of {x} appear in its pictures?",),
    ("person", "clothing_colour"): ("What colour are the clothes of {x}?",
                                    "Which colour does {x} wear?"),
    ("person", "hat"): ("What kind of hat does {x} wear?",),
    ("person", "glasses"): ("What does {x} wear over the eyes?",),
    ("person", "hair_colour"): ("What colour is the hair of {x}?", "Which hair colour does {x} have?"),
    ("place", "building"): ("What type of building is {x}?", "What kind of building houses {x}?"),
    ("place", "roof_colour"): ("What colour is the roof of {x}?", "Which colour is the roof of {x}?"),
    ("place", "windows"): ("How many windows does {x} have?",),
    ("place", "trees"): ("How many trees stand beside {x}?",),
    ("place", "time"): ("Is {x} pictured by day or at night?",),
}


def constraint(kind: str, attr: str, value: str) -> str:
    """A relative clause that picks entities by one attribute ('with a red body')."""
    a = "an" if value[:1] in "aeiou" else "a"
    words = {
        "shape": f"with {a} {value} body", "colour": f"with {a} {value} body",
        "pattern": f"with {a} {value} pattern", "logo_position": f"with its logo at the {value}",
        "logo_colour": f"with {a} {value} logo", "count": f"pictured as {value} units",
        "clothing_colour": f"wearing {value} clothes", "hair_colour": f"with {value} hair",
        "hat": "without a hat" if value == "none" else f"wearing a {value}",
        "glasses": "without glasses" if value == "none" else f"wearing {value}",
        "building": f"housed in {a} {value}", "roof_colour": f"with {a} {value} roof",
        "windows": "with no windows" if value == "none" else f"with {value} windows",
        "trees": {"none": "with no trees", "one": "with one tree"}.get(value, f"with {value} trees"),
        "time": "pictured at night" if value == "night" else "pictured by day",
    }
    if attr not in words:
        raise ValueError(f"no constraint phrase for {kind}.{attr}")
    return words[attr]


# relation -> question about the subject (forward) and its answer type
FORWARD: dict[str, tuple[str, ...]] = {
    "designed_by": ("Who designed {x}?", "Who is credited with the design of {x}?"),
    "developed_by": ("Which company develops {x}?", "Which organisation makes {x}?"),
    "manufactured_in": ("Where is {x} manufactured?", "At which site is {x} assembled?"),
    "shown_at": ("At which event was {x} shown?", "Which event presented {x}?"),
    "successor_of": ("Which product did {x} replace?", "What is the predecessor of {x}?"),
    "works_for": ("Which organisation does {x} work for?", "Who employs {x}?"),
    "based_in": ("Where is {x} based?", "At which site does {x} have an office?"),
    "headquartered_in": ("Where is {x} headquartered?",),
    "owned_by": ("Which organisation owns {x}?", "Who operates {x}?"),
    "held_in": ("Where was {x} held?", "Which site hosted {x}?"),
    "organised_by": ("Who organised {x}?", "Which organisation ran {x}?"),
    "release_year": ("In which year was {x} released?", "When did {x} go on sale?"),
    "role": ("What is the role of {x}?", "What position does {x} hold?"),
    "joined_year": ("In which year did {x} join the company?", "Since when has {x} been with the company?"),
    "city": ("In which city is {x} located?", "Which city is {x} in?"),
    "opened_year": ("In which year did {x} open?", "When did {x} first open?"),
    "founded_year": ("In which year was {x} founded?",),
    "attendees": ("How many people attended {x}?",),
}

# relation -> a noun phrase that picks the subject given the object ({o}), or the object given
# the subject ({s}); used for bridge entities in multi-hop questions
SUBJECT_OF: dict[str, str] = {
    "designed_by": "the product designed by {o}", "manufactured_in": "the product made at {o}",
    "successor_of": "the product that replaced {o}", "works_for": "the person working for {o}",
    "held_in": "the event held at {o}", "shown_at": "the product shown at {o}",
    "based_in": "the person based at {o}",
}
OBJECT_OF: dict[str, str] = {
    "designed_by": "the designer of {s}", "manufactured_in": "the site where {s} is made",
    "developed_by": "the company behind {s}", "successor_of": "the predecessor of {s}",
    "works_for": "the employer of {s}", "based_in": "the site where {s} is based",
    "headquartered_in": "the head office of {s}", "owned_by": "the owner of {s}",
    "held_in": "the venue of {s}", "organised_by": "the organiser of {s}",
}

# image-query wording per kind ("the product in the image")
IN_IMAGE: dict[str, tuple[str, ...]] = {
    "product": ("the product in the image", "the product shown in this picture", "this product"),
    "person": ("the person in the image", "the person in this photo", "this person"),
    "place": ("the site in the image", "the building in this picture", "this site"),
}

# table column for each table-held property of the entity's own page
TABLE_KEY: dict[str, str] = {
    "release_year": "Release year", "price_usd": "Price (USD)", "weight_g": "Weight (g)",
    "joined_year": "Joined", "floor_area_m2": "Floor area (m2)", "opened_year": "Opened",
}
TABLE_ASK: dict[str, tuple[str, ...]] = {
    "price_usd": ("What is the price of {x} in US dollars?", "How much does {x} cost in dollars?"),
    "weight_g": ("How many grams does {x} weigh?", "What is the weight of {x} in grams?"),
    "release_year": ("In which year was {x} released?",),
    "joined_year": ("In which year did {x} join?",),
    "floor_area_m2": ("What is the floor area of {x} in square metres?",),
}
