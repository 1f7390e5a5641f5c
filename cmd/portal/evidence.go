package main

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/hyperpod-governance/portal/internal/evidence"
	"github.com/hyperpod-governance/portal/internal/signing"
)

const evidenceUsage = "usage: portal evidence verify [--key PUBLIC_KEY | --key-file FILE] [--audit-head ID:HASH] BUNDLE\n" +
	"       portal evidence verify-head (--key PUBLIC_KEY | --key-file FILE) SIGNED_TEXT SIGNATURE"

// evidenceCmd is `portal evidence verify [--key K | --key-file F]
// [--audit-head ID:HASH] BUNDLE`: it checks a connection's evidence bundle
// (downloaded from /connections/ID/evidence.json) offline, with no
// database, configuration or network, prints each check that passed, each
// note of what was not checked, and OK, or what failed (and the command
// exits 1). With the portal's published key (--key base64, or --key-file
// with the JSON of /.well-known/hyperpod-portal/evidence-key) the signature
// must be that key's; without it, OK says the signature was not checked
// against a trusted key. With a head the portal published, the bundle's
// chain is compared with it where they meet.
func evidenceCmd(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "verify-head" {
		return verifyHeadCmd(args[1:], stdout, stderr)
	}
	if len(args) == 0 || args[0] != "verify" {
		fmt.Fprintln(stderr, evidenceUsage)
		return errors.New("evidence: the subcommands are verify and verify-head")
	}
	file, opts, err := evidenceVerifyArgs(args[1:])
	if err != nil {
		fmt.Fprintln(stderr, evidenceUsage)
		return fmt.Errorf("evidence verify: %w", err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("evidence verify: %w", err)
	}
	rep := evidence.VerifyWith(data, opts)
	for _, ch := range rep.Checked {
		fmt.Fprintln(stdout, "ok    ", ch)
	}
	for _, n := range rep.Notes {
		fmt.Fprintln(stdout, "NOTE  ", n)
	}
	for _, f := range rep.Failures {
		fmt.Fprintln(stdout, "FAILED", f)
	}
	switch {
	case !rep.OK():
		return fmt.Errorf("evidence verify %s: %d check(s) failed: the bundle is refused", file, len(rep.Failures))
	case rep.SignedByTrustedKey:
		fmt.Fprintf(stdout, "OK: %s verifies and is signed by the trusted key %s (read what this proves under verification_limits in the file)\n", file, signing.KeyID(opts.TrustedKey))
	default:
		fmt.Fprintf(stdout, "OK (hashes only): %s is as it was written, but its signature was NOT checked against a trusted key, so nothing here shows who made it; give --key-file with the portal's published key (/.well-known/hyperpod-portal/evidence-key)\n", file)
	}
	return nil
}

// evidenceVerifyArgs reads verify's flags (--flag VALUE or --flag=VALUE)
// and its one bundle file.
func evidenceVerifyArgs(args []string) (string, evidence.Options, error) {
	var opts evidence.Options
	var file, key, keyFile, head string
	seen := map[string]bool{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, value, hasValue := strings.Cut(a, "=")
		switch name {
		case "--key", "--key-file", "--audit-head":
			if seen[name] {
				return "", opts, fmt.Errorf("%s given twice", name)
			}
			seen[name] = true
			if !hasValue {
				if i+1 >= len(args) {
					return "", opts, fmt.Errorf("%s needs a value", name)
				}
				i++
				value = args[i]
			}
			switch name {
			case "--key":
				key = value
			case "--key-file":
				keyFile = value
			default:
				head = value
			}
		case "-h", "--help":
			return "", opts, errors.New("help")
		default:
			if strings.HasPrefix(a, "-") {
				return "", opts, fmt.Errorf("unknown flag %s", a)
			}
			if file != "" {
				return "", opts, errors.New("give exactly one bundle file")
			}
			file = a
		}
	}
	if file == "" {
		return "", opts, errors.New("give exactly one bundle file")
	}
	if seen["--key"] || seen["--key-file"] {
		pub, err := trustedKey(key, seen["--key"], keyFile, seen["--key-file"])
		if err != nil {
			return "", opts, err
		}
		opts.TrustedKey = pub
	}
	if seen["--audit-head"] {
		h, err := evidence.ParseHeadRef(head)
		if err != nil {
			return "", opts, err
		}
		opts.AuditHead = &h
	}
	return file, opts, nil
}

// verifyHeadCmd is `portal evidence verify-head (--key K | --key-file F)
// SIGNED_TEXT SIGNATURE`: it checks, offline, that a published audit head
// (the daily notice's signed_text and signature lines) was signed by the
// portal's key, so that a mail or webhook message can be told from a
// forged one before its head is trusted.
func verifyHeadCmd(args []string, stdout, stderr io.Writer) error {
	var positional []string
	var key, keyFile string
	keyGiven, fileGiven := false, false
	var err error
	for i := 0; i < len(args) && err == nil; i++ {
		name, value, hasValue := strings.Cut(args[i], "=")
		if name != "--key" && name != "--key-file" {
			positional = append(positional, args[i])
			continue
		}
		if !hasValue && i+1 < len(args) {
			i++
			value, hasValue = args[i], true
		}
		switch {
		case !hasValue:
			err = fmt.Errorf("%s needs a value", name)
		case name == "--key" && !keyGiven:
			key, keyGiven = value, true
		case name == "--key-file" && !fileGiven:
			keyFile, fileGiven = value, true
		default:
			err = fmt.Errorf("%s given twice", name)
		}
	}
	var pub ed25519.PublicKey
	switch {
	case err != nil:
	case !keyGiven && !fileGiven:
		err = errors.New("give the portal's published key (--key or --key-file)")
	case len(positional) != 2:
		err = errors.New("give the signed text and the signature, as the notice prints them")
	default:
		pub, err = trustedKey(key, keyGiven, keyFile, fileGiven)
	}
	if err != nil {
		fmt.Fprintln(stderr, evidenceUsage)
		return fmt.Errorf("evidence verify-head: %w", err)
	}
	text, sig := strings.TrimSpace(positional[0]), strings.TrimSpace(positional[1])
	if !signing.Verify(pub, signing.PurposeAuditHead, text, sig) {
		return fmt.Errorf("evidence verify-head: the signature is not key %s's signature of %q: the published head is refused", signing.KeyID(pub), text)
	}
	fmt.Fprintf(stdout, "OK: the audit head %q is signed by the trusted key %s; check the database against it with `portal audit verify --head HASH`\n", text, signing.KeyID(pub))
	return nil
}

// trustedKey reads the key a verifier trusts: --key (base64 or hex) or
// --key-file (the well-known page's JSON, or the key's text), not both.
func trustedKey(key string, keyGiven bool, keyFile string, fileGiven bool) (ed25519.PublicKey, error) {
	if keyGiven && fileGiven {
		return nil, errors.New("give --key or --key-file, not both")
	}
	if fileGiven {
		b, err := os.ReadFile(keyFile)
		if err != nil {
			return nil, fmt.Errorf("--key-file: %w", err)
		}
		key = string(b)
	}
	return signing.ParsePublic(key)
}
