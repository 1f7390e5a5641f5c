package views

// Tokens is the settings page of a person's API tokens.
type Tokens struct {
	Rows []TokenRow
	// Created is the secret of the token just created, shown once.
	Created     string
	CreatedName string
	// The form: its values (kept on an error) and errors by field.
	Name   string
	Scope  string
	Teams  []TokenTeam // the person's teams
	Days   string
	MaxDay int
	Scopes []Choice
	Errors map[string]string
}

// TokenRow is one of the person's tokens.
type TokenRow struct {
	ID        int64
	Name      string
	Scope     string
	Teams     string
	Created   string
	Expires   string
	LastUsed  string // "never" before the first use
	State     string // active, expired, revoked
	RevokeURL string // "" once revoked
}

// APIDocs is the API's description for people: the operations and the
// schemas of the OpenAPI document.
type APIDocs struct {
	Title, Version, Description string
	Operations                  []APIOperation
	Schemas                     []APISchema
}

// APIOperation is one method on one path.
type APIOperation struct {
	Method, Path, Summary, Description, Scope string
	Params                                    []string
	Responses                                 []string
}

// APISchema is one named schema and its properties.
type APISchema struct {
	Name, Description string
	Properties        []string
}

// TokenTeam is one of the person's teams on the token form.
type TokenTeam struct {
	Name    string
	Checked bool
}
