-- Revenue and units per month and region.
select
    date_trunc('month', order_date) as month,
    region,
    sum(units) as units,
    sum(revenue) as revenue
from {{ ref('stg_sales') }}
group by all
order by month, region
