"""Read an On-Demand rate out of an AWS Price List offer file, to refresh fmcluster/planner/data/prices.json from the
Price List itself. A repository tool, not part of the package; it reads a file you downloaded and fetches nothing:

    curl -fsS --max-time 120 -o eks.json \
      https://pricing.us-east-1.amazonaws.com/offers/v1.0/aws/AmazonEKS/current/us-west-2/index.json
    python scripts/price_list.py eks.json --region us-west-2 --usagetype-suffix AmazonEKS-Hours:perCluster

An offer file (AWS Price List Bulk API, "Reading the price list files") holds ``products`` (SKU -> product family and
attributes such as ``regionCode`` and ``usagetype``) and ``terms.OnDemand`` (SKU -> offer term -> price dimensions,
each with ``unit`` and ``pricePerUnit.USD``). The rate printed is the one On-Demand price dimension of the one
product that matches (its usage type, after the region prefix, equal to the one asked for); anything else (no match,
several, a tiered price) is refused with what was found, exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional


class PriceListError(Exception):
    pass


def usage_type_is(usagetype: str, wanted: str) -> bool:
    """`wanted` is the usage type after its region prefix: us-east-1 has none (NatGateway-Hours), other regions one
    ending in a hyphen (USW2-NatGateway-Hours). A plain suffix test would also take RegionalNatGateway-Hours."""
    return usagetype == wanted or usagetype.endswith("-" + wanted)


def matching_skus(offer: Dict[str, Any], *, region: str, usagetype_suffix: str,
                  product_family: Optional[str] = None) -> List[str]:
    out = []
    for sku, product in offer.get("products", {}).items():
        attrs = product.get("attributes", {})
        if attrs.get("regionCode") != region or not usage_type_is(attrs.get("usagetype", ""), usagetype_suffix):
            continue
        if product_family is not None and product.get("productFamily") != product_family:
            continue
        out.append(sku)
    return sorted(out)


def on_demand_rate(offer: Dict[str, Any], *, region: str, usagetype_suffix: str,
                   product_family: Optional[str] = None) -> Dict[str, Any]:
    """{usd, unit, sku, description, publication_date} of the single matching product's On-Demand price."""
    skus = matching_skus(offer, region=region, usagetype_suffix=usagetype_suffix, product_family=product_family)
    if len(skus) != 1:
        raise PriceListError(f"{len(skus)} products in {region} of usage type {usagetype_suffix!r}"
                             + (f" in family {product_family!r}" if product_family else "")
                             + (f": {', '.join(skus[:10])}" if skus else "") + "; narrow it with --product-family")
    sku = skus[0]
    terms = offer.get("terms", {}).get("OnDemand", {}).get(sku, {})
    dimensions = [d for term in terms.values() for d in term.get("priceDimensions", {}).values()]
    if len(dimensions) != 1:
        raise PriceListError(f"product {sku}: {len(dimensions)} On-Demand price dimensions (a tiered price?); "
                             "read it by hand")
    (d,) = dimensions
    try:
        usd = float(d["pricePerUnit"]["USD"])
    except (KeyError, ValueError):
        raise PriceListError(f"product {sku}: no USD price in {d.get('pricePerUnit')!r}") from None
    return {"usd": usd, "unit": d.get("unit"), "sku": sku, "description": d.get("description"),
            "publication_date": offer.get("publicationDate")}


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("offer_file")
    p.add_argument("--region", required=True)
    p.add_argument("--usagetype-suffix", required=True,
                   help="the usage type after its region prefix, e.g. AmazonEKS-Hours:perCluster, NatGateway-Hours")
    p.add_argument("--product-family", help="e.g. 'NAT Gateway' in the AmazonEC2 offer")
    args = p.parse_args(argv)
    try:
        offer = json.loads(Path(args.offer_file).read_text(encoding="utf-8"))
        rate = on_demand_rate(offer, region=args.region, usagetype_suffix=args.usagetype_suffix,
                              product_family=args.product_family)
    except (OSError, ValueError) as e:
        print(f"price_list: {args.offer_file}: {e}", file=sys.stderr)
        return 2
    except PriceListError as e:
        print(f"price_list: {e}", file=sys.stderr)
        return 2
    print(json.dumps(rate))
    return 0


if __name__ == "__main__":
    sys.exit(main())
