// SPDX-License-Identifier: MIT
/*
 * The options of the CLI and their parsing for one command: a command
 * accepts the options its struct cmd_struct lists, its usage is generated
 * from that list, and any other option is an error (exit status 2) that
 * names the option and the command, suggests the nearest option for a
 * misspelled one, and says which value a missing one wants.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common/json.h"
#include "common/suggest.h"

struct opt_def {
	const char *name;
	char short_name;	/* 0: none */
	const char *arg;	/* the value's name; NULL: takes no value */
	const char *help;	/* what it does, unless the command says otherwise */
};

static const struct opt_def defs[OPT_COUNT] = {
	[OPT_JSON] = { "json", 0, NULL, "JSON Lines output (one object per line)" },
	[OPT_JSON_U64] = { "json-u64", 0, "FORM",
			   "integers past 2^53-1, which doubles (jq, JavaScript)\n"
			   "round: 'string' (default; \"18446744073709551615\")\n"
			   "or 'number'" },
	[OPT_HASH] = { "hash", 0, NULL, "digests of file contents" },
	[OPT_SUBVOL] = { "subvol", 0, "ID", "start in subvolume ID (default 5, the top level)" },
	[OPT_PATH] = { "path", 0, "P", "start at path P (inside --subvol ID if given)" },
	[OPT_INODE] = { "inode", 0, "S:O", "start at the inode of objectid O in subvolume S" },
	[OPT_INUMBITS] = { "inumbits", 0, "N", "the inumbits=N proposal (0 or 32..64)" },
	[OPT_MOUNT_SUBVOL] = { "mount-subvol", 0, "ID",
			       "the mounted subvolume for numdevs=2\n(default: the default subvolume)" },
	[OPT_EXAMPLES] = { "examples", 0, "N", "list N groups per scheme; 0: every group" },
	[OPT_NO_VERIFY] = { "no-verify", 0, NULL, "do not verify data checksums" },
	[OPT_INTACT_ONLY] = { "intact-only", 0, NULL,
			      "only the recovered versions whose every byte was\n"
			      "read (intact, verified or not)" },
	[OPT_SNAPSHOTS] = { "snapshots", 's', NULL, "only snapshots" },
	[OPT_READONLY] = { "readonly", 'r', NULL, "only read-only subvolumes" },
	[OPT_DELETED] = { "deleted", 'd', NULL, "only deleted subvolumes" },
	[OPT_DELETED_ID] = { "deleted", 0, "ID", "the recovered version ID ('btrfsimg deleted')" },
	/* its help names the library's formats: format_help() */
	[OPT_FORMAT] = { "format", 0, "FMT", NULL },
	[OPT_PARTITION] = { "partition", 0, "N",
			    "the Nth partition of a whole-disk image; or VG/LV:\n"
			    "the LVM logical volume LV of volume group VG (an\n"
			    "error if an image holds btrfs itself)" },
	[OPT_PASSPHRASE_FILE] = { "passphrase-file", 0, "FILE",
				  "LUKS passphrase: the exact bytes of FILE\n"
				  "(as cryptsetup --key-file; else a terminal\n"
				  "is asked)" },
	[OPT_VOLUME_KEY_FILE] = { "volume-key-file", 0, "FILE",
				  "LUKS volume key, raw bytes (as cryptsetup\n"
				  "luksDump --dump-volume-key --volume-key-file\n"
				  "writes it)" },
	[OPT_KDF_LIMIT] = { "kdf-limit", 0, "SECONDS",
			    "LUKS key derivation allowed per keyslot, as\n"
			    "estimated for this machine before it runs (default\n"
			    "10; an open: 3 times it); raise it for a slow keyslot" },
	[OPT_OFFSET] = { "offset", 0, "BYTES", "the filesystem starts at BYTES in every image" },
	[OPT_SUPER_MIRROR] = { "super-mirror", 0, "N",
			       "use superblock copy N (0, 1, 2) instead of the newest" },
	[OPT_GENERATION] = { "generation", 0, "N",
			     "show the filesystem as generation N committed it\n"
			     "(a transid `history` lists); what it no longer\n"
			     "reaches is damage" },
	[OPT_NO_LOG_REPLAY] = { "no-log-replay", 0, NULL,
				"show the last committed state (ignore the log tree)" },
	[OPT_VERBOSE] = { "verbose", 'v', NULL, "also report what was read or replayed" },
	[OPT_QUIET] = { "quiet", 'q', NULL, "do not report damage that was worked around,\n"
						 "nor a replayed log tree" },
	[OPT_NUMBERS] = { "numbers", 0, "SCHEME",
			  "inode numbers shown: inumbits=N,numdevs=1 (N 32..64;\n"
			  "default inumbits=56,numdevs=1), nfsd or\n"
			  "nfsd-uniquifier; numdevs=2 and many need a device\n"
			  "per subvolume, which one FUSE mount cannot show" },
	[OPT_FOREGROUND] = { "foreground", 'f', NULL, "stay in the foreground (else serve in the\n"
							 "background once mounted)" },
	[OPT_MOUNT_POINT] = { "mount-point", 0, "DIR",
			      "names begin with DIR, where the image was mounted\n"
			      "(as fls -m; default: /)" },
	[OPT_OUTPUT] = { "output", 'f', "FILE",
			 "write to FILE, created new (an existing file or link\n"
			 "there is refused); else standard output" },
	[OPT_DEVID] = { "devid", 0, "N", "btrfs device N (its devid, as 'btrfsimg super' lists)" },
	[OPT_PHYSICAL] = { "physical", 0, "BYTES", "byte offset BYTES in the btrfs device" },
	[OPT_LENGTH] = { "length", 0, "N", "N bytes from there (default 1)" },
	[OPT_LOGICAL] = { "logical", 0, "L", "logical address L" },
	[OPT_IMAGE_OFFSET] = { "image-offset", 0, "X",
			       "byte offset X in the image file (a container's:\n"
			       "in the disk it holds)" },
	[OPT_CSUM] = { "csum", 0, NULL,
		       "with --json, each regular file's checksum coverage:\n"
		       "full, partial, none, nodatasum, inline or zeros" },
	[OPT_FROM] = { "from", 0, "SNAPSHOT",
		       "the older snapshot: a subvolume id, or its path\nfrom the top level" },
	[OPT_TO] = { "to", 0, "SNAPSHOT",
		     "the newer snapshot: a subvolume id, or its path\nfrom the top level" },
	[OPT_FROM_GENERATION] = { "from-generation", 0, "N",
				  "read the --from side as generation N committed it\n"
				  "(a transid `history` lists)" },
	[OPT_TO_GENERATION] = { "to-generation", 0, "N",
				"read the --to side as generation N committed it\n"
				"(default: the newest)" },
	[OPT_SEND_SUBVOL] = { "subvol", 0, "SNAPSHOT",
			      "the subvolume or snapshot sent: its id, or its\npath from the top level" },
	[OPT_PARENT] = { "parent", 0, "SNAPSHOT",
			 "an incremental stream from SNAPSHOT, which the\nreceiving side holds" },
	[OPT_CLONE_SRC] = { "clone-src", 0, "SNAPSHOT",
			    "extents shared with SNAPSHOT, which the receiving\n"
			    "side holds too, go out as clones (repeatable)" },
	[OPT_PROTO] = { "proto", 0, "N", "the stream's protocol version: 1 (default) or 2" },
	[OPT_COMPRESSED_DATA] = { "compressed-data", 0, NULL,
				  "compressed extents as they are on disk (encoded\n"
				  "writes; needs --proto 2)" },
	[OPT_FSID] = { "fsid", 0, "UUID",
		       "read the filesystem of fsid UUID (or its first 8 or\n"
		       "more hex digits) when several are on the devices\n"
		       "(mkfs over an old one: 'layers --scan' lists them)" },
	[OPT_SCAN] = { "scan", 0, NULL,
		       "read each device once for tree blocks: every btrfs\n"
		       "found, the one the superblock names and older ones" },
	[OPT_HELP] = { "help", 'h', NULL, "this text" },
};

#define VAL_BASE 256	/* getopt values of long options: VAL_BASE + enum cli_opt */
#define HEAD_WIDTH 20
#define HELP_WIDTH 54	/* 80 columns less the head and the margins */

static bool takes(const struct cmd_struct *cmd, int id)
{
	if (id == OPT_HELP)
		return true;
	if (id == OPT_JSON_U64)
		id = OPT_JSON; /* every JSON writer has it */
	for (const struct cmd_option *o = cmd->options; o->id != OPT_END; o++)
		if ((int)o->id == id)
			return true;
	return false;
}

/* ------------------------------------------------------------ usage */

static void put_help(FILE *out, const char *help)
{
	for (const char *p = help; *p; p++) {
		fputc(*p, out);
		if (*p == '\n')
			fprintf(out, "%*s", HEAD_WIDTH + 4, "");
	}
	fputc('\n', out);
}

size_t cli_format_names(char *buf, size_t len)
{
	size_t n = 0;
	buf[0] = '\0';
	for (int f = BTRFSIMG_FORMAT_RAW; btrfsimg_format_name(f); f++) {
		int w = snprintf(buf + n, len - n, "%s%s", n ? ", " : "", btrfsimg_format_name(f));
		if (w < 0 || (size_t)w >= len - n)
			break;
		n += (size_t)w;
	}
	return n;
}

/* --format's help: the library's formats, filled into lines of HELP_WIDTH
 * (as the other options' texts are broken by hand). */
static const char *format_help(char *buf, size_t len)
{
	char text[256], names[160];
	cli_format_names(names, sizeof(names));
	snprintf(text, sizeof(text), "read every IMAGE as FMT: %s (default: detected by signature)",
		 names);
	size_t n = 0, col = 0;
	for (const char *w = text; *w && n + 2 < len;) {
		size_t wl = strcspn(w, " ");
		if (col && col + 1 + wl > HELP_WIDTH) {
			buf[n++] = '\n';
			col = 0;
		} else if (col) {
			buf[n++] = ' ';
			col++;
		}
		if (n + wl + 1 >= len)
			break;
		memcpy(buf + n, w, wl);
		n += wl;
		col += wl;
		w += wl + (w[wl] == ' ');
	}
	buf[n] = '\0';
	return buf;
}

static void put_option(FILE *out, int id, const char *help)
{
	const struct opt_def *d = &defs[id];
	char head[48], generated[320];
	if (!help && id == OPT_FORMAT)
		help = format_help(generated, sizeof(generated));
	if (d->short_name)
		snprintf(head, sizeof(head), "-%c, --%s%s%s", d->short_name, d->name,
			 d->arg ? " " : "", d->arg ? d->arg : "");
	else
		snprintf(head, sizeof(head), "--%s%s%s", d->name, d->arg ? " " : "",
			 d->arg ? d->arg : "");
	fprintf(out, "  %-*s  ", HEAD_WIDTH, head);
	put_help(out, help ? help : d->help);
}

static void put_indented(FILE *out, const char *text)
{
	while (*text) {
		size_t n = strcspn(text, "\n");
		fprintf(out, "  %.*s\n", (int)n, text);
		text += n + (text[n] == '\n');
	}
}

void cli_usage(const struct cmd_struct *cmd, FILE *out)
{
	fprintf(out, "usage: btrfsimg %s [OPTIONS] %s\n\n%s\n\noptions:\n", cmd->name, cmd->args,
		cmd->about);
	for (const struct cmd_option *o = cmd->options; o->id != OPT_END; o++) {
		put_option(out, o->id, o->help);
		if (o->id == OPT_JSON)
			put_option(out, OPT_JSON_U64, NULL);
	}
	put_option(out, OPT_HELP, NULL);
	fputs("\nexamples:\n", out);
	put_indented(out, cmd->examples);
	fputs("\nexit status: 0 success, 1 results despite damage (reported on stderr),\n"
	      "2 nothing could be read, or a usage error\n", out);
}

void cli_list_options(const struct cmd_struct *cmd, FILE *out)
{
	for (int id = OPT_END + 1; id < OPT_COUNT; id++) {
		if (!takes(cmd, id))
			continue;
		if (defs[id].short_name)
			fprintf(out, "-%c\n", defs[id].short_name);
		fprintf(out, "--%s\n", defs[id].name);
	}
}

/* ------------------------------------------------------------ values */

static bool parse_u64(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s || *end || s[0] == '-')
		return false;
	*out = v;
	return true;
}

/* "SUBVOL:OBJECTID", both decimal; "SUBVOL-OBJECTID" too, as bodyfile
 * writes it. */
static bool parse_inode(const char *s, uint64_t *subvol, uint64_t *obj)
{
	char *end;
	errno = 0;
	*subvol = strtoull(s, &end, 10);
	if (errno || end == s || (*end != ':' && *end != '-') || s[0] == '-')
		return false;
	const char *o = end + 1;
	*obj = strtoull(o, &end, 10);
	return !errno && end != o && !*end && o[0] != '-' && *obj != 0;
}

static int bad_value(const char *opt, const char *v)
{
	cli_warn("invalid value for %s: '%s'", opt, v);
	return EXIT_USAGE;
}

/* --format FMT, not one of the library's names: say which are. */
static int bad_format(const char *arg)
{
	char names[160];
	cli_format_names(names, sizeof(names));
	cli_warn("invalid value for --format (%s): '%s'", names, arg);
	return EXIT_USAGE;
}

/* --kdf-limit SECONDS: a decimal number, 0.001 .. 86400. */
static int set_kdf_limit(struct cli *c, const char *arg)
{
	char *end;
	errno = 0;
	double v = strtod(arg, &end);
	if (errno || end == arg || *end || !(v >= 0.001 && v <= 86400))
		return bad_value("--kdf-limit (seconds, 0.001..86400)", arg);
	c->kdf_ms = (uint32_t)(v * 1000 + 0.5);
	return 0;
}

static int set_number(struct cli *c, int id, const char *arg)
{
	uint64_t v;
	switch (id) {
	case OPT_SUPER_MIRROR:
		if (!parse_u64(arg, &v) || v > 2)
			return bad_value("--super-mirror", arg);
		c->opts.super_mirror = (unsigned)v;
		c->opts.flags |= BTRFSIMG_OPEN_SUPER_MIRROR;
		return 0;
	case OPT_PARTITION:
		if (strchr(arg, '/') && arg[0] != '/' && arg[strlen(arg) - 1] != '/') {
			c->volume = arg; /* an LVM logical volume, VG/LV */
			return 0;
		}
		if (!parse_u64(arg, &v) || v == 0 || v > 1024)
			return bad_value("--partition", arg);
		c->opts.partition = (unsigned)v;
		return 0;
	case OPT_OFFSET:
		if (!parse_u64(arg, &v) || v > INT64_MAX)
			return bad_value("--offset", arg);
		c->opts.offset = v;
		c->opts.flags |= BTRFSIMG_OPEN_OFFSET;
		return 0;
	case OPT_SUBVOL:
		if (!parse_u64(arg, &c->subvol))
			return bad_value("--subvol", arg);
		c->have_subvol = true;
		return 0;
	case OPT_GENERATION:
		if (!parse_u64(arg, &c->generation) || c->generation == 0)
			return bad_value("--generation (a transid, 1 or more)", arg);
		return 0;
	case OPT_FROM_GENERATION:
		if (!parse_u64(arg, &c->diff_from_gen) || c->diff_from_gen == 0)
			return bad_value("--from-generation (a transid, 1 or more)", arg);
		return 0;
	case OPT_TO_GENERATION:
		if (!parse_u64(arg, &c->diff_to_gen) || c->diff_to_gen == 0)
			return bad_value("--to-generation (a transid, 1 or more)", arg);
		return 0;
	case OPT_MOUNT_SUBVOL:
		if (!parse_u64(arg, &c->mount_subvol))
			return bad_value("--mount-subvol", arg);
		c->have_mount_subvol = true;
		return 0;
	case OPT_EXAMPLES:
		if (!parse_u64(arg, &c->examples) || c->examples > 1000000)
			return bad_value("--examples (0: all, or up to 1000000)", arg);
		c->have_examples = true;
		return 0;
	case OPT_DEVID:
		c->have_devid = parse_u64(arg, &c->devid);
		return c->have_devid ? 0 : bad_value("--devid", arg);
	case OPT_PHYSICAL:
		c->have_physical = parse_u64(arg, &c->physical);
		return c->have_physical ? 0 : bad_value("--physical", arg);
	case OPT_LENGTH:
		c->have_length = parse_u64(arg, &c->length) && c->length > 0 &&
				 c->length <= INT64_MAX;
		return c->have_length ? 0 : bad_value("--length (1 .. 2^63-1)", arg);
	case OPT_LOGICAL:
		c->have_logical = parse_u64(arg, &c->logical);
		return c->have_logical ? 0 : bad_value("--logical", arg);
	case OPT_IMAGE_OFFSET:
		c->have_image_offset = parse_u64(arg, &c->image_offset);
		return c->have_image_offset ? 0 : bad_value("--image-offset", arg);
	default: /* OPT_INUMBITS */
		if (!parse_u64(arg, &v) || (v != 0 && (v < 32 || v > 64)))
			return bad_value("--inumbits (0 or 32..64)", arg);
		c->inumbits = (int)v;
		return 0;
	}
}

static int set_option(struct cli *c, int id, const char *arg)
{
	switch (id) {
	case OPT_JSON: c->json = true; return 0;
	case OPT_JSON_U64:
		if (strcmp(arg, "string") != 0 && strcmp(arg, "number") != 0)
			return bad_value("--json-u64 (string or number)", arg);
		jw_big_as_number = arg[0] == 'n';
		c->have_json_u64 = true;
		return 0;
	case OPT_HASH: c->hash = true; return 0;
	case OPT_CSUM: c->csum = true; return 0;
	case OPT_SNAPSHOTS: c->only_snapshots = true; return 0;
	case OPT_READONLY: c->only_readonly = true; return 0;
	case OPT_DELETED: c->only_deleted = true; return 0;
	case OPT_INTACT_ONLY: c->intact_only = true; return 0;
	case OPT_DELETED_ID: c->deleted_id = arg; return 0;
	case OPT_NO_VERIFY: c->opts.flags |= BTRFSIMG_OPEN_NO_DATA_VERIFY; return 0;
	case OPT_NO_LOG_REPLAY: c->opts.flags |= BTRFSIMG_OPEN_NO_LOG_REPLAY; return 0;
	case OPT_VERBOSE: c->verbose = true; return 0;
	case OPT_QUIET: c->quiet = true; return 0;
	case OPT_PATH: c->path = arg; return 0;
	case OPT_PASSPHRASE_FILE: c->passphrase_file = arg; return 0;
	case OPT_VOLUME_KEY_FILE: c->volume_key_file = arg; return 0;
	case OPT_KDF_LIMIT: return set_kdf_limit(c, arg);
	case OPT_NUMBERS: c->numbers = arg; return 0;
	case OPT_MOUNT_POINT: c->mount_point = arg; return 0;
	case OPT_FOREGROUND: c->foreground = true; return 0;
	case OPT_OUTPUT: c->output = arg; return 0;
	case OPT_FROM: c->diff_from = arg; return 0;
	case OPT_TO: c->diff_to = arg; return 0;
	case OPT_FSID: c->fsid = arg; return 0;
	case OPT_SCAN: c->scan = true; return 0;
	case OPT_SEND_SUBVOL: c->send_subvol = arg; return 0;
	case OPT_PARENT: c->send_parent = arg; return 0;
	case OPT_CLONE_SRC:
		if (c->nclone_srcs == sizeof(c->clone_srcs) / sizeof(c->clone_srcs[0]))
			return bad_value("--clone-src (at most 64)", arg);
		c->clone_srcs[c->nclone_srcs++] = arg;
		return 0;
	case OPT_COMPRESSED_DATA: c->send_flags |= BTRFSIMG_SEND_COMPRESSED_DATA; return 0;
	case OPT_PROTO:
		if (strcmp(arg, "1") != 0 && strcmp(arg, "2") != 0)
			return bad_value("--proto (1 or 2)", arg);
		c->send_proto = (uint32_t)(arg[0] - '0');
		return 0;
	case OPT_FORMAT:
		c->format = btrfsimg_format_parse(arg);
		if (c->format < 0)
			return bad_format(arg);
		if (!btrfsimg_format_supported(c->format)) {
			cli_warn("--format %s: this build of btrfsimg was made without it", arg);
			return EXIT_USAGE;
		}
		return 0;
	case OPT_INODE:
		if (!parse_inode(arg, &c->inode_subvol, &c->inode_objectid))
			return bad_value("--inode (SUBVOL:OBJECTID)", arg);
		c->inode = arg;
		return 0;
	case OPT_HELP:
		cli_usage(c->command, stdout);
		exit(EXIT_OK);
	default:
		return set_number(c, id, arg);
	}
}

/* ------------------------------------------------------------ errors */

static int not_taken(const struct cli *c, const char *dashes, const char *name)
{
	cli_warn("%s does not take %s%s; see 'btrfsimg %s --help'", c->cmd, dashes, name, c->cmd);
	return EXIT_USAGE;
}

/* The option -@ch means for @cmd (mount's -f is --foreground, dfxml's
 * --output), else the first option with that letter. */
static int short_id(const struct cmd_struct *cmd, char ch)
{
	int any = -1;
	for (int id = OPT_END + 1; id < OPT_COUNT; id++) {
		if (defs[id].short_name != ch)
			continue;
		if (takes(cmd, id))
			return id;
		if (any < 0)
			any = id;
	}
	return any;
}

/* Options whose name starts with @name[0..len) (the command's, or all). */
static int matches(const struct cmd_struct *cmd, const char *name, size_t len, int *first)
{
	int n = 0;
	for (int id = OPT_END + 1; id < OPT_COUNT; id++) {
		if ((cmd && !takes(cmd, id)) || strncmp(defs[id].name, name, len) != 0)
			continue;
		if (strlen(defs[id].name) == len) { /* exact: getopt takes it */
			*first = id;
			return 1;
		}
		if (n++ == 0)
			*first = id;
	}
	return n;
}

static int ambiguous(const struct cli *c, const char *name, size_t len)
{
	fprintf(stderr, "btrfsimg: option '--%.*s' is ambiguous for %s:", (int)len, name, c->cmd);
	for (int id = OPT_END + 1; id < OPT_COUNT; id++)
		if (takes(c->command, id) && strncmp(defs[id].name, name, len) == 0)
			fprintf(stderr, " --%s", defs[id].name);
	fputc('\n', stderr);
	return EXIT_USAGE;
}

static int unknown(const struct cli *c, const char *shown, const char *name)
{
	const char *words[OPT_COUNT];
	size_t n = 0;
	for (int id = OPT_END + 1; id < OPT_COUNT; id++)
		if (takes(c->command, id))
			words[n++] = defs[id].name;
	const char *near = closest_word(name, words, n);
	if (near)
		cli_warn("unknown option '%s' for %s; did you mean --%s?", shown, c->cmd, near);
	else
		cli_warn("unknown option '%s' for %s; see 'btrfsimg %s --help'", shown, c->cmd,
			 c->cmd);
	return EXIT_USAGE;
}

static int bad_long(const struct cli *c, const char *elem)
{
	if (strncmp(elem, "--", 2) != 0) {
		cli_warn("%s: invalid option '%s'", c->cmd, elem);
		return EXIT_USAGE;
	}
	const char *name = elem + 2;
	size_t len = strcspn(name, "=");
	int id = -1;
	if (matches(c->command, name, len, &id) > 1)
		return ambiguous(c, name, len);
	if (matches(NULL, name, len, &id) == 1)
		return not_taken(c, "--", defs[id].name);
	char word[64];
	snprintf(word, sizeof(word), "%.*s", (int)(len < 63 ? len : 63), name);
	return unknown(c, elem, word);
}

/* The argument holding short option @ch: "-json" read as -j -s -o -n is
 * a long option with one dash. */
static const char *short_elem(int argc, char **argv, char ch)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (argv[i][0] == '-' && argv[i][1] != '-' && strchr(argv[i] + 1, ch))
			return argv[i];
	return NULL;
}

static int bad_short(const struct cli *c, int argc, char **argv, char ch)
{
	int id = short_id(c->command, ch);
	if (id > 0 && !takes(c->command, id))
		return not_taken(c, "-", (char[]){ ch, '\0' });
	const char *elem = short_elem(argc, argv, ch);
	if (elem && strlen(elem) > 2)
		return unknown(c, elem, elem + 1);
	return unknown(c, (char[]){ '-', ch, '\0' }, (char[]){ ch, '\0' });
}

static int bad_option(const struct cli *c, int argc, char **argv)
{
	if (optopt >= VAL_BASE) {
		cli_warn("%s: --%s takes no value", c->cmd, defs[optopt - VAL_BASE].name);
		return EXIT_USAGE;
	}
	if (optopt > 0)
		return bad_short(c, argc, argv, (char)optopt);
	return bad_long(c, argv[optind - 1]);
}

static int missing_value(const struct cli *c)
{
	int id = optopt >= VAL_BASE ? optopt - VAL_BASE : short_id(c->command, (char)optopt);
	if (id > 0 && defs[id].arg)
		cli_warn("%s: --%s needs a value (%s)", c->cmd, defs[id].name, defs[id].arg);
	else
		cli_warn("%s: an option needs a value", c->cmd);
	return EXIT_USAGE;
}

/* ------------------------------------------------------------ parsing */

struct parser {
	struct option longs[OPT_COUNT + 1];
	char shorts[2 * OPT_COUNT + 2];
};

static void build(const struct cmd_struct *cmd, struct parser *p)
{
	size_t nl = 0, ns = 0;
	p->shorts[ns++] = ':'; /* a missing value returns ':', not '?' */
	for (int id = OPT_END + 1; id < OPT_COUNT; id++) {
		if (!takes(cmd, id))
			continue;
		const struct opt_def *d = &defs[id];
		p->longs[nl++] = (struct option){ d->name, d->arg ? required_argument : no_argument,
						  NULL, VAL_BASE + id };
		if (d->short_name) {
			p->shorts[ns++] = d->short_name;
			if (d->arg)
				p->shorts[ns++] = ':';
		}
	}
	p->longs[nl] = (struct option){ NULL, 0, NULL, 0 };
	p->shorts[ns] = '\0';
}

static int exclusive(const struct cli *c)
{
	if (c->opts.partition && (c->opts.flags & BTRFSIMG_OPEN_OFFSET)) {
		cli_warn("%s: give --partition or --offset, not both", c->cmd);
		return EXIT_USAGE;
	}
	if (c->verbose && c->quiet) {
		cli_warn("%s: give -v or -q, not both", c->cmd);
		return EXIT_USAGE;
	}
	return cli_needs(c, c->have_json_u64, "--json-u64", c->json, "--json");
}

int cli_parse(struct cli *c, int argc, char **argv)
{
	struct parser p;
	build(c->command, &p);
	opterr = 0;
	optind = 1;
	int o;
	while ((o = getopt_long(argc, argv, p.shorts, p.longs, NULL)) != -1) {
		int rc;
		if (o == '?')
			rc = bad_option(c, argc, argv);
		else if (o == ':')
			rc = missing_value(c);
		else
			rc = set_option(c, o >= VAL_BASE ? o - VAL_BASE
							 : short_id(c->command, (char)o),
					optarg);
		if (rc)
			return EXIT_USAGE;
	}
	c->images = argv + optind;
	c->nimages = argc - optind;
	if (exclusive(c))
		return EXIT_USAGE;
	if (c->command->check)
		return c->command->check(c);
	return cli_need_images(c, 1, "IMAGE...");
}

/* ------------------------------------------------------------ checks */

int cli_need_images(struct cli *c, int min, const char *what)
{
	if (c->nimages >= min)
		return 0;
	if (c->nimages == 0)
		cli_warn("%s: no image given; usage: btrfsimg %s [OPTIONS] %s", c->cmd, c->cmd, what);
	else
		cli_warn("%s: give %s", c->cmd, what);
	return EXIT_USAGE;
}

int cli_inode_alone(const struct cli *c)
{
	if (!c->inode || (!c->path && !c->have_subvol))
		return 0;
	cli_warn("%s: --inode names the start by itself: give it without %s", c->cmd,
		 c->path ? "--path" : "--subvol");
	return EXIT_USAGE;
}

int cli_needs(const struct cli *c, bool given, const char *opt, bool have, const char *needed)
{
	if (!given || have)
		return 0;
	cli_warn("%s: %s only applies with %s", c->cmd, opt, needed);
	return EXIT_USAGE;
}
