package views

// Notifications is the signed-in user's in-app notifications page.
type Notifications struct {
	Items  []NotificationItem
	Unread int
	// More: there are older notifications than the ones listed.
	More bool
}

// NotificationItem is one notification.
type NotificationItem struct {
	ID       int64
	Subject  string
	Kind     string
	When     string
	Link     string // the connection's page; empty for none
	LinkText string
	Read     bool
	ReadURL  string // POST: mark it read
}

// DeliveryFailures is the admins' page of notification deliveries that
// failed and are being retried.
type DeliveryFailures struct {
	Channels []string // the channels this process delivers on
	Rows     []DeliveryFailure
}

// DeliveryFailure is one failing delivery.
type DeliveryFailure struct {
	ID          int64
	OutboxID    int64
	Channel     string
	Kind        string
	Subject     string
	Audience    string
	Recipients  string
	Attempts    int
	LastError   string
	NextAttempt string
	Link        string
}

func joinComma(s []string) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += ", "
		}
		out += v
	}
	return out
}
