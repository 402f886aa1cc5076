"""Sentence templates of the generated wiki: several surface forms per fact, plus distractors.

Every relation can be stated from its subject's page ("The Vorkel X2 was designed by Ada
Quill.") and from its object's page ("Ada Quill is credited as the designer of the Vorkel X2."),
each in several shapes, so a retriever cannot match one fixed sentence pattern. ``{s}`` and
``{o}`` are filled with entity references, ``{v}`` with a literal value. Distractor sentences
use the domain's vocabulary and never state a relation, a literal used by a question, or a
visual attribute (colours and shapes live only in images, so image questions need the image).
"""

from __future__ import annotations

# relation -> (templates on the subject's page, templates on the object's page)
RELATIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "designed_by": (
        ("{s} was designed by {o}.", "{o} led the design of {s}.",
         "Design work on {s} was headed by {o}.", "The industrial design of {s} is credited to {o}."),
        ("{o} designed {s}.", "{o} is credited as the designer of {s}.",
         "One of the projects of {o} is {s}, which {o} designed from the first sketch."),
    ),
    "developed_by": (
        ("{s} is developed by {o}.", "{o} develops and sells {s}.", "{s} is a product of {o}."),
        ("{o} develops {s}.", "{s} is part of the line-up of {o}.", "{o} brought {s} to market."),
    ),
    "manufactured_in": (
        ("{s} is manufactured at {o}.", "Production of {s} takes place at {o}.",
         "Every unit of {s} is assembled at {o}."),
        ("{o} manufactures {s}.", "{s} is built at {o}.", "The assembly lines of {o} turn out {s}."),
    ),
    "shown_at": (
        ("{s} was shown at {o}.", "{o} featured {s} on its main stage.",
         "Visitors of {o} could try {s} for the first time."),
        ("{s} was among the exhibits at {o}.", "{o} featured {s}.",
         "Among the products presented at {o} was {s}."),
    ),
    "successor_of": (
        ("{s} is the successor of {o}.", "{s} replaced {o}.",
         "As the follow-up to {o}, {s} kept much of its predecessor's layout."),
        ("{o} was later replaced by {s}.", "The successor of {o} is {s}."),
    ),
    "works_for": (
        ("{s} works for {o}.", "{s} is employed by {o}.", "{s} is on the staff of {o}."),
        ("{s} is one of the people working at {o}.", "The staff of {o} includes {s}."),
    ),
    "based_in": (
        ("{s} is based at {o}.", "{s} works out of {o}.", "The office of {s} is at {o}."),
        ("{s} is based at {o}.", "{o} hosts the office of {s}."),
    ),
    "headquartered_in": (
        ("{s} is headquartered at {o}.", "The head office of {s} is at {o}."),
        ("{o} houses the headquarters of {s}.", "{o} serves as the head office of {s}."),
    ),
    "owned_by": (
        ("{s} is owned by {o}.", "{o} owns and operates {s}.", "{s} belongs to {o}."),
        ("{o} owns {s}.", "{o} operates the site {s}."),
    ),
    "held_in": (
        ("{s} was held at {o}.", "{s} took place at {o}.", "The venue of {s} was {o}."),
        ("{o} hosted {s}.", "{s} took place at {o}."),
    ),
    "organised_by": (
        ("{s} was organised by {o}.", "{o} organised {s}.", "{s} was run by {o}."),
        ("{o} organised {s}.", "{s} was run by {o}."),
    ),
}

# literal property -> templates on the entity's own page ({org} is the entity's organisation)
LITERALS: dict[str, tuple[str, ...]] = {
    "release_year": ("{s} was released in {v}.", "{s} went on sale in {v}.",
                     "Sales of {s} began in {v}."),
    "role": ("{s} works as a {v}.", "{s} holds the position of {v}.", "By profession {s} is a {v}."),
    "joined_year": ("{s} joined {org} in {v}.", "{s} has been with {org} since {v}."),
    "city": ("{s} is located in {v}.", "{s} stands in the city of {v}.", "{s} lies in {v}."),
    "opened_year": ("{s} opened in {v}.", "{s} first opened its doors in {v}."),
    "founded_year": ("{s} was founded in {v}.", "{s} was established in {v}."),
    "attendees": ("About {v} people attended {s}.", "{s} drew roughly {v} visitors."),
}

DISTRACTORS: tuple[str, ...] = (
    "Engineers spent months refining the {feature} of {s}.",
    "Early reviews of {s} focused on its {feature}.",
    "Internal reports discuss {feature} at length.",
    "A later firmware update improved {feature}.",
    "Trade press compared {feature} across the {category} market.",
    "The team documented what it learned about {feature}.",
    "Customer surveys ranked {feature} among the most valued qualities.",
    "Several prototypes failed early tests of {feature}.",
    "Competing {category} designs took different approaches to {feature}.",
    "The documentation includes a long chapter on {feature}.",
    "Analysts expect {feature} to matter more in the next generation of {category} products.",
    "A public talk about {feature} drew a large audience.",
    "Workshops on {feature} are held several times a year.",
    "Suppliers were asked to report on {feature} every quarter.",
    "Critics argued that {feature} had been overstated in marketing.",
    "Maintenance notes recommend checking {feature} regularly.",
)

# section titles with no facts: padding up to the sampled number of sections per page
FILLER_TITLES: dict[str, tuple[str, ...]] = {
    "product": ("Reception", "Development history", "Trivia", "Support", "Accessories"),
    "person": ("Talks", "Publications", "Recognition", "Trivia", "Mentoring"),
    "organisation": ("History", "Strategy", "Partnerships", "Culture", "Research"),
    "place": ("Facilities", "Sustainability", "Visiting", "Trivia", "Expansion"),
    "event": ("Programme", "Talks", "Media coverage", "Trivia", "Workshops"),
}

ROLES: tuple[str, ...] = ("industrial designer", "hardware engineer", "product manager",
                          "firmware lead", "materials scientist", "design director")

# how a caption states the relation between the depicted entity and the page's entity
CAPTION_RELATION: dict[str, tuple[str, ...]] = {
    "designed_by": ("{s}, designed by {o}.", "{o} with {s}."),
    "manufactured_in": ("{s} at {o}.", "{o}, where {s} is assembled."),
    "shown_at": ("{s} on display at {o}.", "{s} at {o}."),
    "successor_of": ("{o}, the predecessor of {s}.",),
    "works_for": ("{s} of {o}.",),
    "based_in": ("{o}, the workplace of {s}.",),
    "headquartered_in": ("{o}, head office of {s}.",),
    "owned_by": ("{s}, a site of {o}.",),
    "held_in": ("{o}, the venue of {s}.",),
    "developed_by": ("{s} by {o}.",),
}
OWN_CAPTIONS: tuple[str, ...] = ("{s}.", "{s}, front view.", "A photograph of {s}.", "{s} in use.")
