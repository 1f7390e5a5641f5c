// Command portal is the HyperPod governance portal: one binary with the
// subcommands serve (the default), migrate and version, and the operators'
// and pipelines' commands (audit, contract import, contract apply: a client
// of a portal's JSON API, apply*.go, iam-policy, evidence). It parses one typed
// Config from flags and PORTAL_* environment variables, validates it, and
// passes values down; nothing below reads flags or the environment.
//
// It is the only package that wires the others together; no package imports
// it.
package main
