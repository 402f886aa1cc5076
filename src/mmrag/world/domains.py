"""The knowledge domains of the generated enterprise wiki (the gold topics MM-R2's map should find).

Each domain is a product line with its own vocabulary: product categories, the features its
pages talk about, and the kind of activity its sites host. Distractor sentences draw on that
vocabulary, so pages of one domain read alike and pages of different domains read apart,
which is what lets a clustering of passage embeddings recover the domains at all.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Domain:
    slug: str
    name: str
    categories: tuple[str, ...]  # product categories ("robot vacuum")
    features: tuple[str, ...]  # things reviewers and engineers discuss
    activity: str  # what the domain's sites do ("assembles cleaning robots")


DOMAINS: tuple[Domain, ...] = (
    Domain("home-robotics", "Home Robotics",
           ("robot vacuum", "window-cleaning robot", "lawn robot", "pool robot"),
           ("suction power", "obstacle mapping", "docking accuracy", "brush wear", "lidar range"),
           "assembles household cleaning robots"),
    Domain("personal-audio", "Personal Audio",
           ("wireless earbud set", "studio headphone", "smart speaker", "portable amplifier"),
           ("noise cancellation", "driver tuning", "codec latency", "ear-tip fit", "bass response"),
           "tunes and tests audio drivers"),
    Domain("kitchen-appliances", "Kitchen Appliances",
           ("espresso machine", "induction cooktop", "countertop oven", "stand mixer"),
           ("heat-up time", "pump pressure", "thermal control", "motor torque", "descaling cycle"),
           "builds countertop cooking appliances"),
    Domain("urban-mobility", "Urban Mobility",
           ("e-scooter", "cargo bike", "folding e-bike", "electric skateboard"),
           ("battery range", "frame stiffness", "regenerative braking", "hub motor torque",
            "charging time"),
           "welds frames and packs battery modules"),
    Domain("optics-imaging", "Optics and Imaging",
           ("mirrorless camera", "action camera", "telephoto lens", "document scanner"),
           ("sensor readout", "autofocus speed", "lens coating", "image stabilisation",
            "dynamic range"),
           "grinds lenses and calibrates image sensors"),
    Domain("renewable-energy", "Renewable Energy",
           ("home battery", "solar inverter", "heat pump", "micro wind turbine"),
           ("conversion efficiency", "grid synchronisation", "cycle life", "inverter losses",
            "thermal derating"),
           "assembles power electronics and storage cells"),
    Domain("medical-devices", "Medical Devices",
           ("infusion pump", "pulse oximeter", "portable ultrasound", "insulin pen"),
           ("dosing accuracy", "sterilisation", "alarm handling", "clinical validation",
            "sensor drift"),
           "runs clean-room assembly of clinical devices"),
    Domain("gaming-hardware", "Gaming Hardware",
           ("handheld console", "mechanical keyboard", "racing wheel", "VR headset"),
           ("input latency", "frame pacing", "switch actuation", "haptic feedback",
            "thermal throttling"),
           "tests controllers and console boards"),
    Domain("agritech", "Agritech",
           ("soil sensor", "crop-spraying drone", "milking robot", "greenhouse controller"),
           ("soil moisture", "spray drift", "herd monitoring", "irrigation scheduling",
            "yield mapping"),
           "assembles field sensors and farm drones"),
    Domain("home-security", "Home Security",
           ("video doorbell", "smart lock", "alarm hub", "outdoor camera"),
           ("motion detection", "encryption", "battery standby", "night vision range",
            "tamper alerts"),
           "builds locks, sensors and alarm hubs"),
    Domain("wearables", "Wearables",
           ("fitness band", "smartwatch", "smart ring", "sleep tracker"),
           ("heart-rate accuracy", "step counting", "strap comfort", "battery life",
            "sleep staging"),
           "assembles wrist and ring wearables"),
    Domain("marine-equipment", "Marine Equipment",
           ("electric outboard", "sonar fishfinder", "autopilot unit", "bilge pump"),
           ("waterproofing", "sonar resolution", "corrosion resistance", "thrust curve",
            "hull sensing"),
           "tests sealed electronics for boats"),
)
