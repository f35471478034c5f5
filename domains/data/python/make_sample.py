"""Writes the data domain's sample dataset, domains/data/sample/sales.csv: two years of daily
sales of four products in four regions (invented, with a trend, a yearly season and noise).
Deterministic: the same file every time, so the committed copy can be checked against it.

    python domains/data/python/make_sample.py domains/data/sample/sales.csv
"""

import csv
import datetime
import math
import random
import sys

REGIONS = ["North", "South", "East", "West"]
PRODUCTS = {"Widget": 12.50, "Gadget": 29.90, "Gizmo": 7.25, "Doohickey": 54.00}
START = datetime.date(2024, 1, 1)
DAYS = 731  # 2024-01-01 ..= 2025-12-31


def rows():
    rng = random.Random(31)
    order_id = 0
    for day in range(DAYS):
        date = START + datetime.timedelta(days=day)
        # A slow rise over the two years and a summer peak.
        trend = 1.0 + day / DAYS * 0.4
        season = 1.0 + 0.3 * math.sin((date.timetuple().tm_yday - 80) / 365 * 2 * math.pi)
        for region in REGIONS:
            # About one order per region and day, a product drawn for each.
            product = rng.choice(list(PRODUCTS))
            units = max(1, round(rng.gauss(10, 3) * trend * season))
            price = PRODUCTS[product]
            order_id += 1
            yield {
                "order_id": order_id,
                "order_date": date.isoformat(),
                "region": region,
                "product": product,
                "units": units,
                "unit_price": f"{price:.2f}",
                "revenue": f"{units * price:.2f}",
            }


def main(path):
    with open(path, "w", newline="") as f:
        out = csv.DictWriter(f, fieldnames=list(next(rows()).keys()), lineterminator="\n")
        out.writeheader()
        out.writerows(rows())


if __name__ == "__main__":
    main(sys.argv[1])
