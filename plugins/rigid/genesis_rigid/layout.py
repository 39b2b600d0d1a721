"""Column layout of the packed model arrays handed to the kernels (one array per kind keeps the kernels' argument
lists short). Each constant names the first column of a quantity in the array of that kind."""

# link_f [B, L, 33] (per environment: the inertial columns follow the state's links_* parameters): body frame
# relative to the parent, inertial properties in the body frame, the share of its weight gravity compensation holds;
# the fluid around it (MuJoCo's inertia-box model: density, viscosity, wind velocity, the equivalent box's full
# sizes and the rotation from the link frame to the inertia's principal axes, from the model's inertia)
LF_POS, LF_QUAT, LF_MASS, LF_COM, LF_INERTIA, LF_GRAVCOMP = 0, 3, 7, 8, 11, 20
LF_FLUID_DENSITY, LF_FLUID_VISCOSITY, LF_FLUID_WIND, LF_FLUID_BOX, LF_FLUID_IQUAT, LF_N = 21, 22, 23, 26, 29, 33
# link_i [L, 9]: parent link (-1: the world), its joints and dofs (ranges), the last dof moving it (-1: none), and the
# dofs of its kinematic tree (a range; empty for a tree without dofs; all dofs if a tree's are not contiguous)
(LI_PARENT, LI_JOINT_START, LI_JOINT_END, LI_DOF_START, LI_DOF_END, LI_LAST_DOF, LI_TREE_LO, LI_TREE_HI,
 LI_N) = range(9)
# joint_f [J, 7]: anchor and axis in the body frame, the reference position (hinge and slide joints move their body
# by q - ref)
JF_POS, JF_AXIS, JF_REF, JF_N = 0, 3, 6, 7
# joint_i [J, 3]
JI_TYPE, JI_Q_START, JI_DOF_START, JI_N = 0, 1, 2, 3
# dof_f [D, 8]
DF_DAMPING, DF_ARMATURE, DF_STIFFNESS, DF_SPRINGREF, DF_RANGE_LO, DF_RANGE_HI, DF_FORCE_LO, DF_FORCE_HI, DF_N = range(9)
# dof_i [D, 7]: parent dof in the tree (-1 at a root), link, limited flag, q index (-1 for ball/free dofs), the q
# index a PD law's position error reads (DI_Q's, and a free joint's translation dofs' coordinates: -1 for rotation
# dofs); for a ball or free joint's rotation dof, the q index of the joint's quaternion (w) and the dof's axis 0-2
# (-1 otherwise)
DI_PARENT, DI_LINK, DI_LIMITED, DI_Q, DI_PD_Q, DI_ROT_Q, DI_ROT_AXIS, DI_N = range(8)
# geom_f [G, GF_N]: pose in the link frame, size, friction, restitution, centre of the bounding sphere (link frame;
# its radius is geom_rbound, which includes the margins), MuJoCo's contact margin and gap (a pair's are the sums of
# its geoms': contacts are detected within margin + gap and held at a distance of margin)
GF_POS, GF_QUAT, GF_SIZE, GF_FRICTION, GF_RESTITUTION, GF_BCENTRE, GF_MARGIN, GF_GAP = 0, 3, 7, 10, 11, 12, 15, 16
# a hull's box in its geom's frame: centre and half extents (zero for a geom without a hull)
GF_HULL_BOX, GF_N = 17, 23
# geom_i [G, 6]: type, link, and for a convex hull (meshes and boxes in a collision pair; 0 counts otherwise) the
# rows of its vertices and of its faces in hull_f
GI_TYPE, GI_LINK, GI_VERT, GI_N_VERTS, GI_FACE, GI_N_FACES, GI_N = range(7)
# hull_f [H, 4]: a hull vertex row holds (x, y, z, 0), a face row its plane (outward unit normal, offset d: n . x = d
# on the face), both in the geom frame. hull_i [H + K, 2]: for a face row r of hull_f, hull_i[r] = (first row of
# its vertex loop in hull_i, loop length); a loop row holds (vertex row in hull_f, 0). Loops run counter-clockwise
# seen from outside.
HF_N, HI_N = 4, 2
# pair_i [P, 5]: the two geoms (type of the first <= type of the second), first contact slot, number of slots,
# the pair's row of the separating directions kept per environment (s_sep; -1 for a pair GJK never tests)
PI_GEOM_A, PI_GEOM_B, PI_SLOT, PI_N_SLOTS, PI_SEP, PI_N = range(6)
# params_f: gravity (3), substep dt, Baumgarte factor, penetration slop, largest correction velocity,
# regularisation, constraint-solver tolerance (largest impulse change of a sweep that ends the iterations)
PF_GRAVITY, PF_DT, PF_BAUMGARTE, PF_SLOP, PF_MAX_CORRECTION, PF_REG, PF_TOL, PF_N = 0, 3, 4, 5, 6, 7, 8, 9
# params_i: constraint-solver iterations, max contacts per env (the pool's size), collision on, joint limits on, RK4
# integrator, number of fixed tendons
PP_ITERATIONS, PP_MAX_CONTACTS, PP_COLLISION, PP_LIMITS, PP_RK4, PP_TENDONS, PP_CG, PP_N = range(8)
# fixed tendons, T of them with K joint entries in all: ten_f [T + K, 7], ten_i [T + K, 2]. Row t < T of ten_f:
# stiffness, damping, the spring's slack interval (lo, hi), the limit (lo, hi), limited flag; of ten_i: its first
# entry row and entry count. Entry row T + k: ten_f (coefficient, 0...), ten_i (dof, 0). L = sum coef q[dof].
TF_STIFFNESS, TF_DAMPING, TF_SPRING_LO, TF_SPRING_HI, TF_RANGE_LO, TF_RANGE_HI, TF_LIMITED, TF_N = range(8)
TI_START, TI_COUNT, TI_N = 0, 1, 2

# equality constraints: the kinds of the state's eq_type (EQ_NONE: a free slot), and the columns of eq_data
# [B, E, ED_N]: the constrained point on obj1 and on obj2 (each in its link's frame; obj2 = -1: the world's), the
# rotation of obj2's frame in obj1's that a weld holds (w, x, y, z), torquescale (0: a weld holds the point only),
# the polynomial a0..a4 of a joint or tendon equality and the reference positions (lengths) of obj1 and obj2.
# eq_obj [B, E, 2]: links (connect, weld), dofs of hinge/slide joints (joint) or tendons (tendon); obj2 = -1: none
EQ_NONE, EQ_CONNECT, EQ_WELD, EQ_JOINT, EQ_TENDON = range(5)
ED_ANCHOR1, ED_ANCHOR2, ED_RELQUAT, ED_TORQUESCALE, ED_POLY, ED_REF, ED_N = 0, 3, 6, 10, 11, 16, 18
EQ_ROWS = 6  # at most a weld's: entries of the state's equality_impulse per slot

# control modes of dofs_ctrl_mode
CTRL_FORCE, CTRL_POSITION, CTRL_VELOCITY = 0, 1, 2
# constraint row kinds
ROW_NONE, ROW_NORMAL, ROW_FRICTION, ROW_LIMIT, ROW_EQUALITY = 0, 1, 2, 3, 4  # (a tendon's limit row is a ROW_LIMIT)
# s_row_i columns: kind, contact pool entry (-1 for limits and equalities), the row of the normal a friction row is
# bounded by, the row's dofs as two ranges (the trees of the two links; the second is empty when they share one), and
# a limit row's entry of limit_impulse (the limited dofs in order, then the limited tendons) or an equality row's of
# equality_impulse (slot * EQ_ROWS + row)
RI_KIND, RI_CONTACT, RI_NORMAL, RI_LO, RI_HI, RI_LO2, RI_HI2, RI_ITEM, RI_N = range(9)

# s_dof columns (the substep's per-dof scratch [B, D, SD_N]): the bias forces c; the smooth acceleration
# M~^-1 (tau - c); the velocity (the unconstrained one until the constraint stage, then the constrained one); RK4's
# weighted sums of the stages' velocities and accelerations; the unconstrained velocity, kept through the constraint
# stage; the generalized force of the couplings' impulses; the pseudo-velocity of the position pass; the velocity at
# the start of a constraint sweep; 1 where the dof's PD law is saturated (it then acts as its clamped force,
# explicitly: bias_and_mass sets it, smooth_acceleration reads it)
(SD_BIAS, SD_ACC, SD_VEL, SD_RK4_VEL, SD_RK4_ACC, SD_FREE_VEL, SD_EXT, SD_PSEUDO, SD_SWEEP, SD_SATURATED,
 SD_N) = range(11)
# g_dof columns (the reverse's per-dof adjoints [B, D, GD_N]): of the bias forces, of the smooth acceleration (of
# tau once smooth_acceleration_reverse has run), of the unconstrained velocity, of the constrained velocity, of the
# pseudo-velocity, of the couplings' generalized force
GD_BIAS, GD_ACC, GD_FREE_VEL, GD_VEL, GD_PSEUDO, GD_EXT, GD_N = range(7)
# g_con columns (the adjoints of each contact pool entry's geometry [B, C, GC_N]): point (3), normal (3), depth,
# friction coefficient
GC_POS, GC_NORMAL, GC_DEPTH, GC_MU, GC_N = 0, 3, 6, 7, 8
# g_ctrl columns (the adjoints of the controls [B, D, GT_N]), in the order of the state's dofs_ctrl_force,
# dofs_ctrl_pos, dofs_ctrl_vel, dofs_kp, dofs_kv
GT_FORCE, GT_POS, GT_VEL, GT_KP, GT_KV, GT_N = range(6)

