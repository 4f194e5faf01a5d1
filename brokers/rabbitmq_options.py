"""RabbitMQ's URLs as a trigger gives them: the AMQP URL and the management API's, checked into
the ``amqp`` format's options. No AMQP or HTTP client is imported here."""

from __future__ import annotations

from dataclasses import dataclass, field

from brokers.base import QueueSource
from brokers.errors import InvalidMetadata
from brokers.format_api import BrokerInfo, FormatInfo, SnapshotModel, SourceContext
from brokers.rabbitmq_url import management_endpoint, parse_amqp_url

#: where a RabbitMQ queue's arrival and completion totals come from (docs/signals.md)
COUNTS_SOURCE = "management-totals"
#: RabbitMQ's default ``collect_statistics_interval``: the management figures' refresh period
STATISTICS_INTERVAL = 5.0

RABBITMQ = BrokerInfo(
    name="rabbitmq",
    title="RabbitMQ",
    schemes=("amqp", "amqps"),
    default_format="amqp",
    offline_url="amqp://offline-check/",
    url_form="amqp://user:password@host:port/vhost",
    profile_keys=frozenset({"managementUrl"}),
)


@dataclass(frozen=True, slots=True)
class RabbitOptions:
    """The management API's URL, where set; derived from the AMQP URL otherwise."""

    management_url: str | None = field(default=None, repr=False)


def amqp_options(context: SourceContext) -> RabbitOptions:
    """The profile's ``managementUrl``, or the trigger's own, checked with the AMQP URL to make
    a management endpoint; the trigger's own only where it may point."""
    url, origin = context.url, context.origin
    try:
        parse_amqp_url(url)
    except ValueError as error:
        raise origin.error(str(error)) from None
    if origin.profile is not None:
        try:
            management_endpoint(url, origin.management_url)
        except ValueError as error:
            raise origin.error(str(error)) from None
        return RabbitOptions(origin.management_url)
    management_url = context.reader.get("managementUrl") or None
    if management_url is not None:
        context.urls.refuse_local("managementUrl", management_url)
    try:
        endpoint = management_endpoint(url, management_url)
    except ValueError as error:
        raise InvalidMetadata("managementUrl", str(error)) from None
    context.urls.check("managementUrl" if management_url else "url", endpoint.base_url)
    return RabbitOptions(management_url)


def queue_model(info: FormatInfo, source: QueueSource) -> SnapshotModel:
    """A RabbitMQ queue in the simulator, as the adapter reads it with the management API up:
    the publish and ack totals and the unacknowledged count as of the broker's last statistics
    refresh, no enqueue times (publishers rarely set the ``timestamp`` property)."""
    return SnapshotModel(COUNTS_SOURCE, "", info.oldest_end.opposite, refresh=STATISTICS_INTERVAL)
