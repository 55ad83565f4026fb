"""Word lists the seeded site generators draw from (fixed: data depends on the seed only)."""

FIRST = ["alice", "bruno", "chen", "dana", "emeka", "farah", "goran", "hana", "ivan", "jules",
         "kenji", "lena", "mateo", "nadia", "oscar", "priya", "quinn", "rosa", "sami", "tomas",
         "uma", "victor", "wei", "ximena", "yusuf", "zoe"]
LAST = ["adams", "baker", "costa", "diaz", "evans", "fischer", "garcia", "horvat", "ito",
        "jensen", "kowal", "lopez", "moreau", "novak", "okafor", "park", "quist", "rossi",
        "silva", "tanaka"]
ADJ = ["quiet", "bright", "rapid", "hidden", "golden", "silver", "ancient", "modern", "tiny",
       "giant", "lazy", "clever", "bold", "gentle", "frozen", "wild", "simple", "curious",
       "honest", "lucky", "rusty", "shiny", "humble", "brave"]
NOUN = ["river", "garden", "engine", "lantern", "harbor", "meadow", "compass", "castle",
        "rocket", "forest", "bridge", "island", "canyon", "falcon", "comet", "valley",
        "mirror", "anchor", "beacon", "pebble", "orchard", "glacier", "signal", "thicket"]
TOPIC = {
    "books": ["novel", "poetry collection", "memoir", "series", "library", "author"],
    "cooking": ["bread recipe", "soup", "knife", "cast iron pan", "spice mix", "curry"],
    "travel": ["train trip", "hostel", "road trip", "backpack", "city guide", "ferry ride"],
    "gaming": ["speedrun", "boss fight", "mod", "controller", "indie game", "save file"],
    "science": ["telescope", "experiment", "fossil", "microscope", "paper", "eclipse"],
    "python": ["decorator", "type hint", "virtualenv", "asyncio loop", "dataclass", "generator"],
}
