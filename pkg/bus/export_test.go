package bus

import "context"

// ConsumerLag lets the external tests read one durable consumer's backlog.
func (b *Bus) ConsumerLag(ctx context.Context, stream, consumer string) (Lag, error) {
	return b.consumerLag(ctx, stream, consumer)
}
