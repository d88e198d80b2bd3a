"""Word lists of the synthetic catalogue, kept as data.

Nine persona domains as in the reference (``docs/store.md`` §2): appliances, beauty, clothing,
food, home, kids, leisure, sports, supplies. Each domain has three second-level categories, each
with materials, feature words and product types (with a listing price range in dollars); a type
name is the third category level. Word classes are disjoint (no colour is a material, no brand is
a feature, no size is a number token), so a query word hits exactly one field of one word class
and BM25 rankings are easy to reason about. English only, lower-case except brand names, so a
small BPE vocabulary covers every text the store renders.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProductType:
    """A third-level category: its name and listing base-price range (dollars)."""

    name: str
    price_low: float
    price_high: float


@dataclass(frozen=True)
class Subcategory:
    """A second-level category: the materials and features its types share, and its types."""

    name: str
    materials: tuple[str, ...]
    features: tuple[str, ...]
    types: tuple[ProductType, ...]


@dataclass(frozen=True)
class Domain:
    """A persona domain with its short/long labels, colours, sizes and subcategories."""

    key: str
    label_zh: str
    label_long: str
    colors: tuple[str, ...]
    sizes: tuple[str, ...]
    subcategories: tuple[Subcategory, ...]


def _sub(name: str, materials: str, features: str, types: list[tuple[str, float, float]]) -> Subcategory:
    return Subcategory(name, tuple(materials.split(",")), tuple(features.split(",")),
                       tuple(ProductType(n, lo, hi) for n, lo, hi in types))


_COLORS_A = ("black", "white", "grey", "silver", "blue", "red", "green", "beige")
_COLORS_B = ("black", "white", "pink", "navy", "brown", "green", "purple", "yellow", "beige")
_SIZES_GENERIC = ("mini", "small", "medium", "large")

DOMAINS: tuple[Domain, ...] = (
    Domain("appliances", "家电", "home appliances", _COLORS_A, ("compact", "standard", "plus", "max"), (
        _sub("cleaning", "steel,aluminum,plastic,glass,ceramic,carbon",
             "cordless,quiet,smart,washable,portable,turbo,bagless",
             [("vacuum cleaner", 80, 260), ("floor washer", 150, 400), ("window robot", 120, 300)]),
        _sub("kitchen appliances", "steel,aluminum,plastic,glass,ceramic,carbon",
             "digital,quiet,smart,portable,nonstick,programmable,insulated",
             [("rice cooker", 40, 140), ("air fryer", 50, 160), ("electric kettle", 20, 70)]),
        _sub("personal care appliances", "steel,aluminum,plastic,glass,ceramic,carbon",
             "cordless,quiet,ionic,portable,foldable,rechargeable,waterproof",
             [("hair dryer", 25, 90), ("electric shaver", 30, 120), ("electric toothbrush", 20, 80)]),
    )),
    Domain("beauty", "美妆", "beauty and personal care", _COLORS_B, ("travel", "regular", "double", "jumbo"), (
        _sub("skincare", "aloe,collagen,retinol,ceramide,hyaluronic,niacinamide",
             "hydrating,gentle,brightening,soothing,unscented,vegan,organic",
             [("face cream", 12, 60), ("face serum", 15, 70), ("cleansing foam", 8, 30)]),
        _sub("makeup", "mineral,matte,satin,shimmer,velvet,cream",
             "longwear,waterproof,vegan,lightweight,buildable,smudgeproof,hypoallergenic",
             [("lipstick", 8, 35), ("foundation", 12, 50), ("eyeshadow palette", 10, 45)]),
        _sub("hair care", "argan,coconut,keratin,biotin,jojoba,tea",
             "repairing,volumizing,smoothing,gentle,sulfatefree,nourishing,clarifying",
             [("shampoo", 6, 28), ("hair mask", 8, 32), ("hair oil", 9, 36)]),
    )),
    Domain("clothing", "服饰", "clothing and shoes", _COLORS_B, ("small", "medium", "large", "xlarge"), (
        _sub("tops", "cotton,linen,silk,wool,polyester,cashmere",
             "oversized,slim,breathable,cropped,ribbed,casual,classic",
             [("tshirt", 10, 40), ("sweater", 25, 90), ("blouse", 18, 60)]),
        _sub("bottoms", "denim,cotton,linen,corduroy,twill,nylon",
             "stretch,straight,wide,highrise,casual,tapered,pleated",
             [("jeans", 25, 90), ("skirt", 18, 60), ("trousers", 20, 75)]),
        _sub("shoes", "leather,canvas,suede,mesh,rubber,knit",
             "cushioned,lightweight,breathable,slipon,waterproof,casual,chunky",
             [("sneakers", 30, 120), ("boots", 45, 160), ("sandals", 15, 60)]),
    )),
    Domain("food", "食品", "food and drinks", ("red", "gold", "green", "white", "black", "orange", "blue"),
           ("sample", "regular", "family", "bulk"), (
        _sub("tea and coffee", "oolong,jasmine,arabica,robusta,matcha,chamomile",
             "organic,decaf,roasted,loose,premium,fairtrade,smoked",
             [("tea tin", 8, 40), ("coffee beans", 10, 45), ("drip coffee", 9, 35)]),
        _sub("snacks", "almond,cashew,walnut,peanut,oat,rice",
             "salted,crunchy,glutenfree,sugarfree,spicy,baked,honeyed",
             [("snack box", 10, 40), ("nut mix", 8, 35), ("cracker pack", 5, 20)]),
        _sub("pantry", "acacia,wildflower,sesame,olive,soybean,chili",
             "organic,raw,coldpressed,aged,natural,spicy,premium",
             [("honey jar", 9, 40), ("cooking oil", 8, 35), ("sauce bottle", 5, 22)]),
    )),
    Domain("home", "家居", "home and kitchen", _COLORS_A, _SIZES_GENERIC, (
        _sub("kitchenware", "bamboo,steel,ceramic,glass,cast iron,silicone",
             "foldable,nonstick,dishwasher safe,stackable,lidded,heavy duty,compact",
             [("cutting board", 10, 40), ("frying pan", 18, 70), ("storage jar", 6, 28)]),
        _sub("bedding", "cotton,linen,bamboo,microfiber,silk,down",
             "breathable,hypoallergenic,quilted,cooling,washable,plush,lightweight",
             [("duvet cover", 25, 90), ("pillow", 12, 50), ("blanket", 20, 80)]),
        _sub("storage", "plastic,rattan,fabric,wood,metal,acrylic",
             "stackable,foldable,lidded,wall mounted,clear,modular,handled",
             [("storage box", 8, 35), ("shoe rack", 18, 70), ("laundry basket", 10, 40)]),
    )),
    Domain("kids", "母婴", "baby and kids", _COLORS_B, ("newborn", "infant", "toddler", "child"), (
        _sub("feeding", "silicone,glass,bamboo,stainless,plastic,ceramic",
             "bpafree,spillproof,leakproof,insulated,microwave safe,weighted,divided",
             [("baby bottle", 8, 35), ("sippy cup", 6, 25), ("feeding plate", 6, 22)]),
        _sub("toys", "wood,plush,plastic,felt,rubber,foam",
             "educational,musical,stackable,sensory,washable,magnetic,interactive",
             [("building blocks", 12, 50), ("stuffed animal", 8, 35), ("puzzle set", 8, 30)]),
        _sub("baby gear", "cotton,mesh,polyester,aluminum,foam,nylon",
             "foldable,adjustable,lightweight,portable,padded,reclining,breathable",
             [("baby carrier", 25, 90), ("play mat", 20, 70), ("diaper bag", 18, 60)]),
    )),
    Domain("leisure", "文娱", "hobbies and entertainment", _COLORS_A, _SIZES_GENERIC, (
        _sub("music", "maple,spruce,mahogany,rosewood,plastic,brass",
             "acoustic,electric,beginner,portable,tuned,handmade,vintage",
             [("ukulele", 30, 120), ("harmonica", 10, 45), ("drum pad", 20, 70)]),
        _sub("crafts", "acrylic,watercolor,charcoal,graphite,oil,pastel",
             "professional,beginner,blendable,archival,refillable,travel,vibrant",
             [("paint set", 10, 50), ("sketchbook", 6, 25), ("marker set", 8, 40)]),
        _sub("games", "wood,cardboard,plastic,resin,metal,felt",
             "strategy,family,cooperative,classic,travel,collectible,magnetic",
             [("board game", 15, 60), ("chess set", 15, 70), ("card game", 6, 25)]),
    )),
    Domain("sports", "运动", "sports and outdoors", _COLORS_A, ("small", "medium", "large", "xlarge"), (
        _sub("fitness", "rubber,foam,steel,neoprene,latex,cork",
             "nonslip,adjustable,thick,portable,anti burst,sweatproof,ergonomic",
             [("yoga mat", 12, 50), ("dumbbell set", 25, 110), ("resistance band", 6, 25)]),
        _sub("outdoor", "nylon,polyester,aluminum,carbon,canvas,goretex",
             "waterproof,ultralight,windproof,packable,insulated,reflective,durable",
             [("hiking backpack", 30, 120), ("camping tent", 45, 180), ("trekking pole", 15, 60)]),
        _sub("cycling", "carbon,aluminum,titanium,foam,lycra,gel",
             "aero,ventilated,padded,reflective,quick dry,breathable,adjustable",
             [("bike helmet", 25, 90), ("cycling gloves", 8, 30), ("bike light", 10, 40)]),
    )),
    Domain("supplies", "日用", "household supplies", ("white", "blue", "green", "grey", "pink", "yellow", "purple"),
           ("trial", "single", "twin", "value"), (
        _sub("cleaning supplies", "microfiber,loofah,cellulose,bamboo,cotton,nylon",
             "reusable,absorbent,scratchfree,lintfree,biodegradable,heavy duty,disposable",
             [("cleaning cloth", 4, 18), ("scrub sponge", 3, 14), ("mop refill", 6, 25)]),
        _sub("paper goods", "wood,bamboo,recycled,virgin,cotton,sugarcane",
             "soft,unscented,thick,travel,embossed,flushable,lotion",
             [("facial tissue", 4, 20), ("toilet paper", 6, 30), ("kitchen towel", 5, 22)]),
        _sub("laundry", "enzyme,plant based,oxygen,lavender,citrus,baking soda",
             "concentrated,unscented,gentle,hypoallergenic,quick dissolve,colorfast,eco",
             [("laundry detergent", 8, 35), ("fabric softener", 6, 25), ("stain remover", 5, 20)]),
    )),
)

BRANDS: tuple[str, ...] = (
    "Nordvik", "Brightway", "Calloway", "Dunmore", "Elmcrest", "Fairhaven", "Grisham", "Harbury",
    "Ivesdale", "Juniper", "Kestrel", "Larkfield", "Marlowe", "Northam", "Oakhurst", "Pemberly",
    "Quillon", "Ravensby", "Stanwick", "Thornbury", "Upland", "Vantor", "Westbrook", "Yarrow",
    "Zephyra", "Ashgrove", "Bellmont", "Corvane", "Deltora", "Everly", "Foxley", "Granton",
    "Holloway", "Islay", "Jasperly", "Kinross", "Lumera", "Mossby", "Nettleton", "Orrin",
    "Prescot", "Rivenna",
)
"""Shop names (brand = shop_name). Each domain uses :data:`BRANDS_PER_DOMAIN` of them."""

BRANDS_PER_DOMAIN = 16

PROVINCES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("north", ("ashford", "brookvale", "cedarton")),
    ("south", ("dunhill", "eastport", "fernley")),
    ("east", ("glenmoor", "harlow", "irvington")),
    ("west", ("jarrow", "kingsley", "lowell")),
)
GENDERS = ("female", "male")
AGE_BANDS = ("18-24", "25-34", "35-44", "45-54", "55+")
SPEND_LEVELS = ("low", "medium", "high")
MEMBER_LEVELS = ("basic", "silver", "gold")
DEVICES = ("phone", "tablet", "laptop")
ACTIVE_HOURS = ("morning", "afternoon", "evening", "night")
PAYMENT_METHODS = ("card", "wallet", "transfer")

HARD_BUDGET_PHRASES = ("under {} dollars", "at most {} dollars", "no more than {} dollars", "within {} dollars")
APPROX_BUDGET_PHRASES = ("around {} dollars", "about {} dollars")
"""Budget phrasings of ``instruction_simple`` (hard upper bounds and approximate ones, ×1.1)."""

MODEL_PREFIXES = ("ax", "bx", "cx", "dk", "ev", "fx", "gt", "hx", "kz", "lm", "mx", "nv", "px", "rx", "sx", "tz")
"""Model codes are ``<prefix>-<3 digits>``: one search token with letters and digits (the model field)."""


def domain_brands(domain_index: int) -> tuple[str, ...]:
    """The shop names of one domain: a rotating window of :data:`BRANDS` (neighbours overlap)."""
    start = (domain_index * 5) % len(BRANDS)
    return tuple(BRANDS[(start + i) % len(BRANDS)] for i in range(BRANDS_PER_DOMAIN))
