-- One row per order, typed: the source as the other models read it.
select
    order_id,
    cast(order_date as date) as order_date,
    region,
    product,
    units,
    cast(revenue as decimal(12, 2)) as revenue
from {{ source('raw', 'sales') }}
