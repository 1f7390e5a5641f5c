package awstest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// IdentityStore is the IAM Identity Center identity store endpoint
// (awsJson1_1, X-Amz-Target AWSIdentityStore.<Operation>): users, groups and
// memberships that a test adds, looked up the way the portal does at login
// (GetUserId, ListGroupMembershipsForMember, DescribeGroup), when it finds
// a team's group (GetGroupId), and when the review scheduler lists a group's
// members (ListGroupMemberships).
type IdentityStore struct {
	*Core
	storeID     string
	users       map[string]string // user id -> userName
	groups      map[string]string // group id -> display name
	memberships []isMembership    // in the order they were added
	nextID      int

	// MaxPageSize caps a ListGroupMemberships(ForMember) page below the
	// caller's MaxResults, as the service may, so tests can force several
	// pages. Zero: MaxResults (or 100) decides alone.
	MaxPageSize int
}

type isMembership struct{ id, userID, groupID string }

// NewIdentityStore starts an identity store endpoint with its own store id
// (StoreID), closed when tb ends.
func NewIdentityStore(tb testing.TB) *IdentityStore {
	f := &IdentityStore{
		Core:    newCore(tb, "identitystore", true),
		storeID: "d-9067a1b2c3",
		users:   map[string]string{}, groups: map[string]string{},
	}
	f.serveJSON11("AWSIdentityStore", f.ops())
	return f
}

// StoreID is the identity store's id (d-xxxxxxxxxx); requests naming any
// other store fail as they do at the service.
func (f *IdentityStore) StoreID() string { return f.storeID }

// StoreARN is the identity store's ARN, which the service accepts in place
// of the id.
func (f *IdentityStore) StoreARN() string {
	return "arn:aws:identitystore::" + Account + ":identitystore/" + f.storeID
}

// Set changes settings under the endpoint's lock.
func (f *IdentityStore) Set(fn func(*IdentityStore)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// newID makes an id in the shape Identity Center uses for users, groups and
// memberships: ten hex digits, '-', a UUID. The caller holds mu.
func (f *IdentityStore) newID() string {
	f.nextID++
	return fmt.Sprintf("9067a1b2c3-%08x-0000-4000-8000-%012x", f.nextID, f.nextID)
}

// AddUser adds a user with the given userName and returns its user id.
func (f *IdentityStore) AddUser(userName string) (userID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range f.users {
		if n == userName {
			f.tb.Fatalf("awstest identitystore: user %q added twice", userName)
		}
	}
	id := f.newID()
	f.users[id] = userName
	f.event("created", "user")
	return id
}

// AddGroup adds a group with the given display name and returns its group id.
func (f *IdentityStore) AddGroup(displayName string) (groupID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range f.groups {
		if n == displayName {
			f.tb.Fatalf("awstest identitystore: group %q added twice", displayName)
		}
	}
	id := f.newID()
	f.groups[id] = displayName
	f.event("created", "group")
	return id
}

// AddMembership makes the user a member of the group.
func (f *IdentityStore) AddMembership(userID, groupID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.users[userID]; !ok {
		f.tb.Fatalf("awstest identitystore: AddMembership: no user %s", userID)
	}
	if _, ok := f.groups[groupID]; !ok {
		f.tb.Fatalf("awstest identitystore: AddMembership: no group %s", groupID)
	}
	for _, m := range f.memberships {
		if m.userID == userID && m.groupID == groupID {
			f.tb.Fatalf("awstest identitystore: user %s is already in group %s", userID, groupID)
		}
	}
	f.memberships = append(f.memberships, isMembership{id: f.newID(), userID: userID, groupID: groupID})
	f.event("created", "membership")
}

// RemoveMembership takes the user out of the group (as an administrator
// would in Identity Center).
func (f *IdentityStore) RemoveMembership(userID, groupID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.memberships = slices.DeleteFunc(f.memberships, func(m isMembership) bool {
		return m.userID == userID && m.groupID == groupID
	})
	f.event("deleted", "membership")
}

// RemoveUser deletes the user and their memberships.
func (f *IdentityStore) RemoveUser(userID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.users, userID)
	f.memberships = slices.DeleteFunc(f.memberships, func(m isMembership) bool { return m.userID == userID })
	f.event("deleted", "user")
}

// Request and response shapes, with the service's member names (from the
// SDK's schemas). Unions (AlternateIdentifier, MemberId) list every member
// the service knows, so that a request the service would accept is not
// refused by the strict decoder; exactly one must be set.
type (
	isExternalID struct {
		Issuer *string
		Id     *string
	}
	isUniqueAttribute struct {
		AttributePath  *string
		AttributeValue json.RawMessage // a document; for these paths a JSON string
	}
	isAlternateIdentifier struct {
		ExternalId      *isExternalID
		UniqueAttribute *isUniqueAttribute
	}
	isGetIDIn struct {
		IdentityStoreId     *string
		AlternateIdentifier *isAlternateIdentifier
	}
	isMemberID struct {
		UserId *string
	}
	isListForMemberIn struct {
		IdentityStoreId *string
		MemberId        *isMemberID
		MaxResults      *int32
		NextToken       *string
	}
	// ListGroupMemberships: IdentityStoreId, GroupId, MaxResults (1-100),
	// NextToken
	// (https://docs.aws.amazon.com/singlesignon/latest/IdentityStoreAPIReference/API_ListGroupMemberships.html).
	isListMembershipsIn struct {
		IdentityStoreId *string
		GroupId         *string
		MaxResults      *int32
		NextToken       *string
	}
	isDescribeGroupIn struct {
		IdentityStoreId *string
		GroupId         *string
	}
	isMembershipOut struct {
		IdentityStoreId string
		MembershipId    string
		MembershipArn   string
		GroupId         string
		MemberId        map[string]string
		CreatedAt       float64
		CreatedBy       string
	}
)

// Patterns of the service's input shapes (API reference; the SDK's schemas
// carry no constraints). Since identity stores, users and groups may also be
// named by ARN, those forms are accepted too.
var (
	isStoreIDPattern  = regexp.MustCompile(`^(d-[0-9a-f]{10}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$`)
	isStoreARNPattern = regexp.MustCompile(`^arn:aws[a-z-]*:identitystore::[0-9]{12}:identitystore/(d-[0-9a-f]{10})$`)
	isResourceID      = regexp.MustCompile(`^([0-9a-f]{10}-|)[A-Fa-f0-9]{8}-[A-Fa-f0-9]{4}-[A-Fa-f0-9]{4}-[A-Fa-f0-9]{4}-[A-Fa-f0-9]{12}$`)
	isGroupARN        = regexp.MustCompile(`^arn:aws[a-z-]*:identitystore:::group/(([0-9a-f]{10}-|)[A-Fa-f0-9]{8}-[A-Fa-f0-9]{4}-[A-Fa-f0-9]{4}-[A-Fa-f0-9]{4}-[A-Fa-f0-9]{12})$`)
	isAttributePath   = regexp.MustCompile(`^\p{L}+(?:\.\p{L}+){0,2}$`)
	isNextToken       = regexp.MustCompile(`^[-a-zA-Z0-9+=/:_]*$`)
)

func (f *IdentityStore) ops() map[string]handler {
	return map[string]handler{
		"GetUserId": func(_ *http.Request, decode func(any) *Error) (any, *Error) {
			var in isGetIDIn
			if e := decode(&in); e != nil {
				return nil, e
			}
			return f.getUserID(in)
		},
		"GetGroupId": func(_ *http.Request, decode func(any) *Error) (any, *Error) {
			var in isGetIDIn
			if e := decode(&in); e != nil {
				return nil, e
			}
			return f.getGroupID(in)
		},
		"ListGroupMembershipsForMember": func(_ *http.Request, decode func(any) *Error) (any, *Error) {
			var in isListForMemberIn
			if e := decode(&in); e != nil {
				return nil, e
			}
			return f.listForMember(in)
		},
		"ListGroupMemberships": func(_ *http.Request, decode func(any) *Error) (any, *Error) {
			var in isListMembershipsIn
			if e := decode(&in); e != nil {
				return nil, e
			}
			return f.listMemberships(in)
		},
		"DescribeGroup": func(_ *http.Request, decode func(any) *Error) (any, *Error) {
			var in isDescribeGroupIn
			if e := decode(&in); e != nil {
				return nil, e
			}
			return f.describeGroup(in)
		},
	}
}

// idsNotFound is a ResourceNotFoundException with its ResourceType (GROUP,
// USER, IDENTITY_STORE), which tells a missing store from a missing user.
func idsNotFound(resourceType, format string, args ...any) *Error {
	e := BadRequest("ResourceNotFoundException", format, args...)
	e.Fields = map[string]any{"ResourceType": resourceType}
	return e
}

// checkStore checks IdentityStoreId: malformed is a ValidationException, a
// well-formed id of another store is not found.
func (f *IdentityStore) checkStore(id *string) *Error {
	if id == nil {
		return Validation("1 validation error detected: Value null at 'identityStoreId' failed to satisfy constraint: Member must not be null")
	}
	v := *id
	if m := isStoreARNPattern.FindStringSubmatch(v); m != nil {
		v = m[1]
	} else if len(v) < 1 || len(v) > 36 || !isStoreIDPattern.MatchString(v) {
		return Validation("1 validation error detected: Value '%s' at 'identityStoreId' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", *id, isStoreIDPattern)
	}
	if v != f.storeID {
		return idsNotFound("IDENTITY_STORE", "identity store %s does not exist", v)
	}
	return nil
}

// isUniqueAttrValue checks an AlternateIdentifier that must be a
// UniqueAttribute with one of paths and a string value, and returns the
// value; ok is false for a well-formed ExternalId, which no user or group
// here has.
func isUniqueAttrValue(ai *isAlternateIdentifier, paths ...string) (value string, ok bool, e *Error) {
	switch {
	case ai == nil:
		return "", false, Validation("1 validation error detected: Value null at 'alternateIdentifier' failed to satisfy constraint: Member must not be null")
	case (ai.ExternalId == nil) == (ai.UniqueAttribute == nil):
		return "", false, Validation("AlternateIdentifier must have exactly one of ExternalId and UniqueAttribute")
	case ai.ExternalId != nil:
		x := ai.ExternalId
		if x.Issuer == nil || x.Id == nil || *x.Issuer == "" || *x.Id == "" {
			return "", false, Validation("ExternalId needs an Issuer and an Id")
		}
		return "", false, nil
	}
	ua := ai.UniqueAttribute
	if ua.AttributePath == nil || len(ua.AttributeValue) == 0 || string(ua.AttributeValue) == "null" {
		return "", false, Validation("UniqueAttribute needs an AttributePath and an AttributeValue")
	}
	p := *ua.AttributePath
	if len(p) > 255 || !isAttributePath.MatchString(p) {
		return "", false, Validation("Value '%s' at 'alternateIdentifier.uniqueAttribute.attributePath' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", p, isAttributePath)
	}
	if !slices.Contains(paths, p) {
		return "", false, Validation("Invalid attribute path %s: the only unique attributes here are %s", p, strings.Join(paths, ", "))
	}
	var s string
	if err := json.Unmarshal(ua.AttributeValue, &s); err != nil || s == "" {
		return "", false, Validation("AttributeValue for %s must be a non-empty string, got %s", p, ua.AttributeValue)
	}
	return s, true, nil
}

func (f *IdentityStore) getUserID(in isGetIDIn) (any, *Error) {
	if e := f.checkStore(in.IdentityStoreId); e != nil {
		return nil, e
	}
	v, ok, e := isUniqueAttrValue(in.AlternateIdentifier, "userName", "emails.value")
	if e != nil {
		return nil, e
	}
	// Only userName is stored: a lookup by e-mail or external id finds
	// nobody, as for a user who has no such attribute.
	if ok && *in.AlternateIdentifier.UniqueAttribute.AttributePath == "userName" {
		for id, n := range f.users {
			if n == v {
				return map[string]string{"IdentityStoreId": f.storeID, "UserId": id, "UserArn": "arn:aws:identitystore:::user/" + id}, nil
			}
		}
	}
	return nil, idsNotFound("USER", "no user matches the alternate identifier")
}

func (f *IdentityStore) getGroupID(in isGetIDIn) (any, *Error) {
	if e := f.checkStore(in.IdentityStoreId); e != nil {
		return nil, e
	}
	v, ok, e := isUniqueAttrValue(in.AlternateIdentifier, "displayName")
	if e != nil {
		return nil, e
	}
	if ok {
		for id, n := range f.groups {
			if n == v {
				return map[string]string{"IdentityStoreId": f.storeID, "GroupId": id, "GroupArn": "arn:aws:identitystore:::group/" + id}, nil
			}
		}
	}
	return nil, idsNotFound("GROUP", "no group matches the alternate identifier")
}

// A NextToken is opaque to callers; here it names the member or group it
// was issued for and the offset, so a token reused for another is refused.
func isPageToken(owner string, offset int) string {
	return base64.StdEncoding.EncodeToString([]byte(owner + "|" + strconv.Itoa(offset)))
}

func (f *IdentityStore) listForMember(in isListForMemberIn) (any, *Error) {
	if e := f.checkStore(in.IdentityStoreId); e != nil {
		return nil, e
	}
	if in.MemberId == nil || in.MemberId.UserId == nil {
		return nil, Validation("1 validation error detected: Value null at 'memberId' failed to satisfy constraint: Member must not be null")
	}
	uid := *in.MemberId.UserId
	if len(uid) > 47 || !isResourceID.MatchString(uid) {
		return nil, Validation("Value '%s' at 'memberId.userId' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", uid, isResourceID)
	}
	if _, ok := f.users[uid]; !ok {
		return nil, idsNotFound("USER", "user %s does not exist", uid)
	}
	var all []isMembership
	for _, m := range f.memberships {
		if m.userID == uid {
			all = append(all, m)
		}
	}
	return f.page(all, "user:"+uid, in.MaxResults, in.NextToken)
}

// listMemberships is ListGroupMemberships: the group's memberships, in the
// order they were added, paged as ListGroupMembershipsForMember is.
func (f *IdentityStore) listMemberships(in isListMembershipsIn) (any, *Error) {
	if e := f.checkStore(in.IdentityStoreId); e != nil {
		return nil, e
	}
	if in.GroupId == nil {
		return nil, Validation("1 validation error detected: Value null at 'groupId' failed to satisfy constraint: Member must not be null")
	}
	gid := *in.GroupId
	if len(gid) < 1 || len(gid) > 47 || !isResourceID.MatchString(gid) {
		return nil, Validation("Value '%s' at 'groupId' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", gid, isResourceID)
	}
	if _, ok := f.groups[gid]; !ok {
		return nil, idsNotFound("GROUP", "group %s does not exist", gid)
	}
	var all []isMembership
	for _, m := range f.memberships {
		if m.groupID == gid {
			all = append(all, m)
		}
	}
	return f.page(all, "group:"+gid, in.MaxResults, in.NextToken)
}

// page answers one page of memberships: MaxResults 1-100 (default 100,
// capped by MaxPageSize), and a NextToken that names what it was issued
// for (owner) and the offset.
func (f *IdentityStore) page(all []isMembership, owner string, maxResults *int32, nextToken *string) (any, *Error) {
	max := 100
	if maxResults != nil {
		if *maxResults < 1 || *maxResults > 100 {
			return nil, Validation("Value '%d' at 'maxResults' failed to satisfy constraint: Member must have value between 1 and 100", *maxResults)
		}
		max = int(*maxResults)
	}
	if f.MaxPageSize > 0 {
		max = min(max, f.MaxPageSize)
	}
	start := 0
	if nextToken != nil {
		t := *nextToken
		if len(t) < 1 || len(t) > 65535 || !isNextToken.MatchString(t) {
			return nil, Validation("Value at 'nextToken' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", isNextToken)
		}
		b, err := base64.StdEncoding.DecodeString(t)
		who, off, _ := strings.Cut(string(b), "|")
		n, aerr := strconv.Atoi(off)
		if err != nil || aerr != nil || who != owner || n < 0 || n > len(all) {
			return nil, Validation("The pagination token is not valid for this request")
		}
		start = n
	}
	end := min(start+max, len(all))
	page := make([]isMembershipOut, 0, end-start)
	for _, m := range all[start:end] {
		page = append(page, isMembershipOut{
			IdentityStoreId: f.storeID, MembershipId: m.id, MembershipArn: "arn:aws:identitystore:::membership/" + m.id,
			GroupId: m.groupID, MemberId: map[string]string{"UserId": m.userID},
			CreatedAt: epoch(time.Unix(1700000000, 0)), CreatedBy: "awstest",
		})
	}
	res := map[string]any{"GroupMemberships": page}
	if end < len(all) {
		res["NextToken"] = isPageToken(owner, end)
	}
	return res, nil
}

func (f *IdentityStore) describeGroup(in isDescribeGroupIn) (any, *Error) {
	if e := f.checkStore(in.IdentityStoreId); e != nil {
		return nil, e
	}
	if in.GroupId == nil {
		return nil, Validation("1 validation error detected: Value null at 'groupId' failed to satisfy constraint: Member must not be null")
	}
	gid := *in.GroupId
	if m := isGroupARN.FindStringSubmatch(gid); m != nil {
		gid = m[1]
	} else if len(gid) > 47 || !isResourceID.MatchString(gid) {
		return nil, Validation("Value '%s' at 'groupId' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", gid, isResourceID)
	}
	name, ok := f.groups[gid]
	if !ok {
		return nil, idsNotFound("GROUP", "group %s does not exist", gid)
	}
	return map[string]any{
		"IdentityStoreId": f.storeID, "GroupId": gid, "GroupArn": "arn:aws:identitystore:::group/" + gid,
		"DisplayName": name, "CreatedAt": epoch(time.Unix(1700000000, 0)), "CreatedBy": "awstest",
	}, nil
}
