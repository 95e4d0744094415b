/* SPDX-License-Identifier: MIT */
/* Shared state of the btrfsimg command line: parsed options, the open
 * filesystem, the exit-status rules (0 ok, 1 results despite damage,
 * 2 nothing readable or a usage error), and the description of a command
 * (struct cmd_struct, one per cmd_*.c file, as btrfs-progs' cmds/). */
#ifndef BTRFSIMG_TOOLS_CLI_H
#define BTRFSIMG_TOOLS_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "btrfsimg.h"

enum { EXIT_OK = 0, EXIT_DAMAGED = 1, EXIT_FAILED = 2, EXIT_USAGE = 2 };

struct cmd_struct;

struct cli {
	const char *cmd;
	const struct cmd_struct *command;
	bool json, hash, verbose, quiet;
	bool csum;		/* walk --csum */
	bool have_json_u64;	/* --json-u64 given (it sets jw_big_as_number) */
	bool only_snapshots, only_readonly, only_deleted;	/* subvols' filters */
	bool intact_only;	/* extract --deleted --intact-only */
	struct btrfsimg_open_opts opts;
	int format;		/* --format: enum btrfsimg_format (0: detect) */
	bool have_subvol;
	uint64_t subvol;
	uint64_t generation;	/* --generation N; 0: the superblock's */
	const char *fsid;	/* --fsid UUID (or a prefix); NULL: the superblock's */
	bool scan;		/* layers --scan */
	const char *path;
	const char *inode;	/* "SUBVOL:OBJECTID", parsed into the two below */
	uint64_t inode_subvol, inode_objectid;
	int inumbits;		/* -1: not given */
	bool have_mount_subvol;
	uint64_t mount_subvol;
	bool have_examples;
	uint64_t examples;	/* collisions: groups listed per scheme, 0 every one */
	char **images;
	int nimages;
	const char *destdir;
	const char *deleted_id;	/* cat --deleted ID */
	const char *passphrase_file, *volume_key_file;	/* LUKS keys */
	uint32_t kdf_ms;	/* --kdf-limit, milliseconds; 0: not given */
	const char *volume;	/* --partition VG/LV: an LVM logical volume */
	const char *out;	/* unallocated's OUT ('-': standard output) */
	const char *output;	/* dfxml -f FILE (NULL: standard output) */
	int argc;		/* the command line as given (dfxml records it) */
	char **argv;
	const char *mountpoint;	/* mount: the last argument */
	const char *numbers;	/* mount --numbers SCHEME */
	const char *mount_point;	/* bodyfile --mount-point: names' prefix */
	const char *diff_from, *diff_to;	/* diff --from, --to: an id or a path */
	uint64_t diff_from_gen, diff_to_gen;	/* diff --from-generation, --to-generation */
	const char *send_subvol, *send_parent;	/* send, diff --subvol; send --parent */
	uint32_t send_proto;	/* send --proto (0: 1) */
	const char *clone_srcs[64];	/* send --clone-src, each an id or a path */
	size_t nclone_srcs;
	unsigned send_flags;	/* BTRFSIMG_SEND_* */
	bool foreground;	/* mount -f */
	/* owner: what range is asked about */
	bool have_devid, have_physical, have_length, have_logical, have_image_offset;
	uint64_t devid, physical, length, logical, image_offset;
	btrfsimg_fs *fs;
	uint64_t errors;	/* per-item failures that did not stop the command */
};

/* Every option of the CLI; a command accepts the ones it lists. */
enum cli_opt {
	OPT_END = 0,
	OPT_JSON, OPT_JSON_U64, OPT_HASH, OPT_SUBVOL, OPT_PATH, OPT_INODE, OPT_INUMBITS,
	OPT_MOUNT_SUBVOL, OPT_EXAMPLES,
	OPT_NO_VERIFY, OPT_INTACT_ONLY,
	/* subvols' filters, as btrfs subvolume list -s, -r, -d */
	OPT_SNAPSHOTS, OPT_READONLY, OPT_DELETED, OPT_DELETED_ID,
	/* opening an image */
	OPT_FORMAT, OPT_PARTITION, OPT_OFFSET, OPT_SUPER_MIRROR, OPT_GENERATION, OPT_NO_LOG_REPLAY, OPT_VERBOSE, OPT_QUIET,
	OPT_PASSPHRASE_FILE, OPT_VOLUME_KEY_FILE, OPT_KDF_LIMIT,	/* LUKS */
	/* mount */
	OPT_NUMBERS, OPT_FOREGROUND,
	/* bodyfile: the name prefix, as fls -m */
	OPT_MOUNT_POINT,
	OPT_OUTPUT,	/* dfxml -f FILE */
	/* owner: a byte range */
	OPT_DEVID, OPT_PHYSICAL, OPT_LENGTH, OPT_LOGICAL, OPT_IMAGE_OFFSET,
	OPT_CSUM,	/* walk: checksum coverage per file */
	OPT_FROM, OPT_TO,	/* diff: the two snapshots */
	OPT_FROM_GENERATION, OPT_TO_GENERATION,	/* diff: one subvolume, two generations */
	OPT_SEND_SUBVOL, OPT_PARENT, OPT_CLONE_SRC, OPT_PROTO, OPT_COMPRESSED_DATA,	/* send */
	OPT_FSID,	/* the filesystem to read of several on the devices */
	OPT_SCAN,	/* layers: every btrfs whose tree blocks are found */
	OPT_HELP,
	OPT_COUNT
};

/* One option a command accepts; @help NULL: the option's usual text. A
 * command that takes OPT_JSON takes OPT_JSON_U64 with it. */
struct cmd_option {
	enum cli_opt id;
	const char *help;
};

/* The options of every command that opens a filesystem (--help is implied). */
#define CMD_IMAGE_OPTIONS                                                              \
	{ OPT_FORMAT, NULL }, { OPT_PARTITION, NULL }, { OPT_OFFSET, NULL }, { OPT_SUPER_MIRROR, NULL },     \
	{ OPT_NO_LOG_REPLAY, NULL }, { OPT_VERBOSE, NULL }, { OPT_QUIET, NULL },      \
	{ OPT_PASSPHRASE_FILE, NULL }, { OPT_VOLUME_KEY_FILE, NULL }, { OPT_KDF_LIMIT, NULL }, \
	{ OPT_FSID, NULL }

struct cmd_struct {
	const char *name;
	const char *summary;	/* one line, for `btrfsimg --help` */
	const char *args;	/* the positional arguments: "IMAGE..." */
	const char *about;	/* what it prints, for `btrfsimg CMD --help` */
	const char *examples;	/* lines, each a full command line */
	const struct cmd_option *options;	/* ends with OPT_END; --help is implied */
	/* Option combinations and positional arguments, after parsing; NULL:
	 * at least one IMAGE. Returns 0 or EXIT_USAGE (the reason said). */
	int (*check)(struct cli *c);
	int (*run)(struct cli *c);
	bool no_fs;		/* reads image files itself: no filesystem is opened */
};

extern const struct cmd_struct cmd_struct_layers, cmd_struct_verify_image;
extern const struct cmd_struct cmd_struct_super, cmd_struct_subvols, cmd_struct_walk,
	cmd_struct_cat, cmd_struct_extract, cmd_struct_bodyfile, cmd_struct_inodes,
	cmd_struct_collisions, cmd_struct_partitions, cmd_struct_mount;
extern const struct cmd_struct cmd_struct_history, cmd_struct_deleted;
extern const struct cmd_struct cmd_struct_verify, cmd_struct_unallocated;
extern const struct cmd_struct cmd_struct_dfxml;
extern const struct cmd_struct cmd_struct_extents, cmd_struct_owner;
extern const struct cmd_struct cmd_struct_diff, cmd_struct_send;

/* The subvolume walk, extract and bodyfile start in: --inode's, else
 * --subvol's, else 5 (the top level). */
static inline uint64_t cli_start_subvol(const struct cli *c)
{
	return c->inode ? c->inode_subvol : c->have_subvol ? c->subvol : 5;
}

/* Print "btrfsimg: <msg>" on stderr. */
void cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Report a library failure with the handle's message; returns EXIT_FAILED. */
int cli_fail(struct cli *c, int rc, const char *what);
/* The same with the message of @fs (a handle other than @c->fs). */
int cli_fail_on(btrfsimg_fs *fs, int rc, const char *what);
/* The exit status for a command that produced its results. */
int cli_status(const struct cli *c);
/* A subvolume by id or by the path of its root from the top level: 0, or
 * an exit status (the reason said). */
int cli_subvol_arg(struct cli *c, const char *opt, const char *arg, uint64_t *id);
/* The same looked up in @fs (a second handle, as diff --from-generation's). */
int cli_subvol_arg_in(struct cli *c, btrfsimg_fs *fs, const char *opt, const char *arg,
		      uint64_t *id);

/* options.c: parse argv (after the command name) with @c->command's
 * options, run its check; EXIT_OK, or EXIT_USAGE with the reason said.
 * --help prints the usage and exits 0. */
int cli_parse(struct cli *c, int argc, char **argv);
/* The command's usage: options, arguments, examples. */
void cli_usage(const struct cmd_struct *cmd, FILE *out);
/* Every option @cmd accepts, one a line ("-v" and "--verbose" both). */
void cli_list_options(const struct cmd_struct *cmd, FILE *out);
/* The library's container formats, "raw, split, ..., vhdx" (not "auto"),
 * into @buf of @len bytes; the length written. */
size_t cli_format_names(char *buf, size_t len);
/* Checks commands share: at least @min positional arguments; --inode
 * excludes --path and --subvol. Return 0 or EXIT_USAGE. */
int cli_need_images(struct cli *c, int min, const char *what);
int cli_inode_alone(const struct cli *c);
/* "@opt only applies with @needed" when @given and not @have. */
int cli_needs(const struct cli *c, bool given, const char *opt, bool have, const char *needed);

#endif
